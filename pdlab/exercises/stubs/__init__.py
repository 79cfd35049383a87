"""The stubs ``pdlab exercises start N`` writes out, one file per exercise, below the
exercise's statement; each function raises ``NotImplementedError`` until the learner writes it."""
