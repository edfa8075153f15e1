"""scripts/bench filters: the cost of job filter rules in LuxiD's scheduling pass.

One pass of the pure scheduler (L{ganeti.jobs.scheduler.schedule}) over Q
queued jobs with 20 running, without rules and with the rules of a typical
maintenance (a soft drain by watermark, an ACCEPT for the maintenance's
reason, two RATE_LIMITs on opcodes, a CONTINUE).  No daemons: LuxiD runs
this pass on every submission and job end, so its time is added to each.
Prints a table (CPU time of one pass, the least of 9), then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

from ganeti.jobs import scheduler
from ganeti.jobs.filtering import FilterRule, check_action
from ganeti.jobs.model import QueuedJob

OPCODES = ["OP_TEST_DELAY", "OP_INSTANCE_STARTUP", "OP_INSTANCE_MIGRATE", "OP_INSTANCE_REPLACE_DISKS"]


def rules(watermark: int) -> list[FilterRule]:
    def rule(uuid: str, priority: int, action: object, *predicates: object) -> FilterRule:
        return FilterRule(uuid=uuid, watermark=watermark, priority=priority, predicates=list(predicates),
                          action=check_action(action))

    return sorted([
        rule("a", 0, "ACCEPT", ["reason", ["=", "reason", "maintenance"]]),
        rule("b", 1, "PAUSE", ["jobid", [">", "id", "watermark"]]),
        rule("c", 5, "RATE_LIMIT 2", ["opcode", ["=", "OP_ID", "OP_INSTANCE_MIGRATE"]]),
        rule("d", 6, "RATE_LIMIT 4", ["opcode", ["&", ["=", "OP_ID", "OP_INSTANCE_REPLACE_DISKS"],
                                                 ["=~", "instance_name", "^web"]]]),
        rule("e", 9, "CONTINUE", ["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]),
    ], key=lambda r: r.order)


def jobs(count: int) -> dict[int, QueuedJob]:
    out = {}
    for job_id in range(1, count + 1):
        op = {"OP_ID": OPCODES[job_id % len(OPCODES)], "instance_name": "web%d" % job_id,
              "reason": [["gnt:user", "maintenance" if job_id % 10 == 0 else "routine", 0]]}
        out[job_id] = QueuedJob.new(job_id, [op], when=1000.0)
    return out


def one_pass(queue: dict[int, QueuedJob], running: list[int], with_rules: list[FilterRule]) -> float:
    """The CPU time of a scheduling pass, in ms: the least of 9 (the machine may be busy)."""
    samples = []
    for _ in range(9):
        start = time.process_time()
        scheduler.schedule(queue, running, 40, rules=with_rules)
        samples.append((time.process_time() - start) * 1000)
    return min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, nargs="+", default=[100, 1000, 5000])
    args = parser.parse_args()
    figures: dict[str, float] = {}
    print("%-10s %-12s %-12s" % ("queued", "no rules", "5 rules"))
    for count in args.queued:
        queue = jobs(count + 20)
        running = list(range(1, 21))
        plain = one_pass(queue, running, [])
        filtered = one_pass(queue, running, rules(watermark=count // 2))
        print("%-10d %-12s %-12s" % (count, "%.2f ms" % plain, "%.2f ms" % filtered))
        figures["pass_ms_%d" % count] = round(plain, 3)
        figures["pass_ms_%d_rules" % count] = round(filtered, 3)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
