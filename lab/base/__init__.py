"""What every floor of the lab stands on."""
