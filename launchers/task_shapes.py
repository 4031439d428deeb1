"""The task's shapes (M, N, K), as the runner's task.yml lists them: its tests, then its
benchmarks, and the seed it gives each."""

TEST_SHAPES = ((8, 2112, 7168), (16, 3072, 1536), (64, 3072, 1536), (256, 2880, 512))
BENCHMARK_SHAPES = ((4, 2880, 512), (16, 2112, 7168), (32, 4096, 512), (32, 2880, 512),
                    (64, 7168, 2048), (256, 3072, 1536))
TASK_SHAPES = TEST_SHAPES + BENCHMARK_SHAPES
TASK_SEEDS = dict(zip(TASK_SHAPES, (124, 6635, 45, 78, 4565, 15, 457, 54, 687, 7856)))
