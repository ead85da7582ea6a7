"""Engine unit tests (a package, so their basenames may repeat integration tests' names)."""
