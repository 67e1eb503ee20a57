"""The fault runs' one retry (lab.scaffold.setup_retry): a try whose setup worked is
judged at once, a failed one is tried once more and said, a second failure comes back
as setup, with its reason, and is reported apart from the verdicts; and the diagnosis
a row that does not pass carries."""

import unittest

from lab.scaffold import setup_retry


class Tried(unittest.TestCase):
    def tried(self, *whys):
        """setup_retry.tried over tries whose setup failed for each of whys (None: it
        worked): (its result, why, the tries made, the lines said)."""
        tries, said, made = iter(whys), [], []

        def attempt():
            made.append(len(made) + 1)
            return {"try": len(made), "setup": next(tries)}
        result, why = setup_retry.tried(attempt, lambda r: r["setup"], said.append,
                                        "x: the row's setup failed")
        return result, why, len(made), said

    def test_a_setup_that_worked_is_judged_at_once(self):
        self.assertEqual(self.tried(None), ({"try": 1, "setup": None}, None, 1, []))

    def test_a_failed_setup_is_tried_once_more(self):
        result, why, made, said = self.tried("a switch", None)
        self.assertEqual((result["try"], why, made), (2, None, 2))
        self.assertEqual(said, ["x: the row's setup failed: a switch; running it again"])

    def test_twice_is_setup_with_the_second_reason(self):
        result, why, made, said = self.tried("a switch", "no reset")
        self.assertEqual((result["try"], why, made), (2, "no reset", 2))
        self.assertEqual(said, ["x: the row's setup failed: a switch; running it again",
                                "x: the row's setup failed: no reset"])

    def test_how_it_says_it_tries_again(self):
        said = []
        setup_retry.tried(lambda: "rows", lambda r: "no cut", said.append,
                          "the partition's setup failed", "making it again")
        self.assertEqual(said[0], "the partition's setup failed: no cut; making it again")

    def test_a_setup_row_is_no_verdict_and_says_why(self):
        row = setup_retry.setup_verdict({"strategy": "x", "verdict": None}, "no reset")
        self.assertEqual((row["verdict"], row["reason"]), ("setup", "setup: no reset"))


class Diagnosis(unittest.TestCase):
    class Inst:
        name = "A"

        @staticmethod
        def log_file():
            return "a.log"

        @staticmethod
        def log_window(wall0, wall1):
            return []

    class Events:
        def account(self, t0, t1, origin):
            return [f"{t0}-{t1} from {origin}"]

    WINDOW = (10.0, 0.0, 20.0, 1.5)

    def test_the_events_and_logs_of_the_window_from_its_origin(self):
        lines = setup_retry.diagnosis("the row", self.WINDOW, ("the kill", 12.0),
                                      self.Events(), [self.Inst()])
        self.assertEqual(lines, [
            "the row from 1970-01-01T00:00:00.000Z to 1970-01-01T00:00:01.500Z; "
            "times below are seconds from the kill",
            "the Sentinels' events:", "  10.0-20.0 from 12.0",
            "stockd A's log (a.log):", "  nothing"])

    def test_no_origin_is_the_window_s_start_and_no_events_no_sentinels(self):
        lines = setup_retry.diagnosis("the partition", self.WINDOW, None, None, [self.Inst()])
        self.assertTrue(lines[0].endswith("seconds from its start"))
        self.assertNotIn("the Sentinels' events:", lines)
        lines = setup_retry.diagnosis("the row", self.WINDOW, None, self.Events(), [])
        self.assertEqual(lines[-1], "  10.0-20.0 from 10.0")


if __name__ == "__main__":
    unittest.main()
