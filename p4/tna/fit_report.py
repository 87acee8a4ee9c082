"""Reads bf-p4c's logs of p4/tna/atp.p4 and says whether it fits Tofino 1, with its budget.

Fits: the last table allocation of table_summary.log needs at most 12 stages in ingress and in
egress (bf-p4c with -S writes the logs even when tables are placed outside the 12 stages).
Prints per stage the stateful ALUs, SRAM and TCAM blocks used (resources.json).
"""
import argparse
import json
import os
import re
import sys

STAGES = 12          # Tofino 1: MAU stages per pipe
STATEFUL_ALUS = 4    # per stage
SRAMS = 80           # per stage
TCAMS = 24           # per stage


def stages_needed(summary_path):
    text = open(summary_path).read()
    ingress = re.findall(r"Number of stages for ingress table allocation: (\d+)", text)
    egress = re.findall(r"Number of stages for egress table allocation: (\d+)", text)
    if not ingress or not egress:
        sys.exit(f"fit: no table allocation in {summary_path}")
    return int(ingress[-1]), int(egress[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lanes", type=int, required=True, help="values per packet (ATP_LANES)")
    parser.add_argument("--pool", type=int, required=True, help="aggregators (ATP_POOL)")
    parser.add_argument("logs", help="bf-p4c's pipe/logs directory")
    args = parser.parse_args()

    ingress, egress = stages_needed(os.path.join(args.logs, "table_summary.log"))
    resources = json.load(open(os.path.join(args.logs, "resources.json")))["resources"]["mau"]
    salus = srams = tcams = 0
    print("stage  stateful ALUs  SRAM  TCAM  registers")
    for stage in resources["mau_stages"]:
        meters = stage["meter_alus"]["meters"]
        names = sorted({u["used_by"].split(".")[-1] for m in meters for u in m["usages"]})
        used = (len(meters), len(stage["rams"]["srams"]), len(stage["tcams"]["tcams"]))
        salus, srams, tcams = salus + used[0], srams + used[1], tcams + used[2]
        print(f"{stage['stage_number']:5}  {used[0]:5} of {STATEFUL_ALUS}   {used[1]:4}  {used[2]:4}  "
              f"{' '.join(names)}")
    print(f"total  {salus} of {STATEFUL_ALUS * STAGES} stateful ALUs, {srams} of {SRAMS * STAGES} "
          f"SRAM blocks, {tcams} of {TCAMS * STAGES} TCAM blocks")
    print(f"budget: {args.lanes} values per packet, {args.pool} aggregators; stages: ingress "
          f"{ingress}, egress {egress} of {STAGES}")
    if ingress > STAGES or egress > STAGES:
        print(f"p4-test: p4/tna/atp.p4 does not fit Tofino 1: {max(ingress, egress)} stages needed")
        return 1
    print("p4-test: p4/tna/atp.p4 fits Tofino 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
