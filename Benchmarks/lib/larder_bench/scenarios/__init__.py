"""One module per scenario family; main runs them in the order of config.ALL_SCENARIOS and the opt-in ones."""
