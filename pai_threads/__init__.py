"""PAI threads: durable threads, runs and their transport, as a Django app."""
