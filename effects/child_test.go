package effects_test

// childReactorEnv, when set, makes the test binary run as a reactor process (see
// runChildReactor) instead of running tests: crash tests start and kill such processes.
const childReactorEnv = "RECKON_TEST_CHILD_REACTOR"

func runChildReactor() int { return 2 }
