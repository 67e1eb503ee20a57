"""The ground floor: what every other floor of the lab stands on, and nothing of the
lab's own below it.

    common        errors that stop a run (exit 2), progress lines, options read from
                  flags or the environment, the results directory, REPO
    waiting       one wait with a deadline (wait_until) for every part that waits, and
                  a look taken every so often in the background (Periodic)
"""
