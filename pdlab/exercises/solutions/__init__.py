"""The reference solutions, one file per exercise (``pdlab exercises solution N`` shows one;
the tests check that each passes its grader)."""
