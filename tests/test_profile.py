"""tools.profile on the CPU: the ncu command, the raw CSV parser and the report."""

import sys

from mxfp4_mm.tools import profile

RAW = '''==PROF== Connected to process 1 (python3)
==PROF== Profiling "preshuffle_gemm_kernel": 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum","launch__grid_size","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__inst_executed.sum"
"","","","","","","","ns","","ratio","ratio","inst"
"0","1","python3","h","preshuffle_gemm_kernel","1","7","12,500","224","0.50","2.25","1,024,000"
"1","1","python3","h","splitk_reduce_kernel","1","7","2,000","8","0.10","0.30","4,096"
"2","1","python3","h","preshuffle_gemm_kernel","1","7","8,000","56","1.50","0.25","512"
'''


def test_command_runs_this_module_as_the_child_under_ncu():
    command = profile.ncu_command("/opt/ncu", [(16, 2112, 7168), (4, 2880, 512)])
    assert command[0] == "/opt/ncu"
    assert command[command.index("--profile-from-start") + 1] == "off"
    assert command[-6:] == [sys.executable, "-m", "tools.profile", "--child", "16,2112,7168",
                            "4,2880,512"]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert "gpu__time_duration.sum" in metrics and any(m.startswith("regex:") for m in metrics)


def test_parse_raw_csv_reads_every_kernel_with_units_and_separators():
    kernels = profile.parse_raw_csv(RAW)
    assert [k["name"] for k in kernels] == ["preshuffle_gemm_kernel", "splitk_reduce_kernel",
                                            "preshuffle_gemm_kernel"]
    first = kernels[0]
    assert first["values"]["gpu__time_duration.sum"] == 12.5     # ns -> µs
    assert first["values"]["smsp__inst_executed.sum"] == 1024000
    assert first["stalls"] == {"barrier": 0.5, "long_scoreboard": 2.25}


def test_parse_raw_csv_without_a_header_gives_nothing():
    assert profile.parse_raw_csv("==PROF== nothing profiled\n") == []


def test_report_labels_kernels_with_their_shapes_and_top_stalls():
    report = profile.format_report([(16, 2112, 7168), (4, 2880, 512)], profile.parse_raw_csv(RAW))
    lines = report.splitlines()
    assert lines[1].startswith("16x2112x7168") and "long_scoreboard 2.25, barrier 0.50" in lines[1]
    assert lines[2].startswith("16x2112x7168") and "splitk_reduce" in lines[2]
    assert lines[3].startswith("4x2880x512") and "barrier 1.50, long_scoreboard 0.25" in lines[3]
