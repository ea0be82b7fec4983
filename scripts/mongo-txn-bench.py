#!/usr/bin/env python3
"""Transactions/s of a 2-document transfer over the MongoDB wire protocol (issue 15).

Each of THREADS pymongo clients runs, for SECONDS, transfers between two random accounts of
ACCOUNTS through `with_transaction` (read both balances, then update both), and then the same
two updates without a transaction, for the cost of the transaction against the same writes.
Prints one JSON line: transfers/s, retried transactions, single-write pairs/s, and whether the
sum of balances is unchanged. Needs pymongo (the e2e tests install it into .deps/):

    PYTHONPATH=.deps/pymongo-4.20.1 scripts/mongo-txn-bench.py 127.0.0.1:27017 admin:secret
"""

import json
import random
import sys
import threading
import time

from pymongo import MongoClient

ADDR, CREDS = sys.argv[1], sys.argv[2]
THREADS = int(sys.argv[3]) if len(sys.argv) > 3 else 16
SECONDS = float(sys.argv[4]) if len(sys.argv) > 4 else 10
ACCOUNTS = int(sys.argv[5]) if len(sys.argv) > 5 else 1000


def client():
    return MongoClient(f"mongodb://{CREDS}@{ADDR}/?authSource=admin", maxPoolSize=1)


def run(work):
    done, tried = [0] * THREADS, [0] * THREADS

    def worker(t):
        c = client()
        accounts = c.bench.accounts
        rng = random.Random(t)
        end = time.monotonic() + SECONDS
        while time.monotonic() < end:
            a, b = rng.sample(range(ACCOUNTS), 2)
            tried[t] += work(c, accounts, f"acc{a}", f"acc{b}")
            done[t] += 1
        c.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - start), sum(tried) - sum(done)


def transfer(c, accounts, a, b):
    attempts = [0]

    def body(s):
        attempts[0] += 1
        src = accounts.find_one({"_id": a}, session=s)
        accounts.find_one({"_id": b}, session=s)
        if src["balance"] >= 1:
            accounts.update_one({"_id": a}, {"$inc": {"balance": -1}}, session=s)
            accounts.update_one({"_id": b}, {"$inc": {"balance": 1}}, session=s)

    with c.start_session() as s:
        s.with_transaction(body)
    return attempts[0]


def plain(c, accounts, a, b):
    accounts.update_one({"_id": a}, {"$inc": {"balance": -1}})
    accounts.update_one({"_id": b}, {"$inc": {"balance": 1}})
    return 1


def main():
    c = client()
    c.bench.accounts.drop()
    c.bench.accounts.insert_many([{"_id": f"acc{i}", "balance": 100} for i in range(ACCOUNTS)])
    txn_rate, retried = run(transfer)
    total = sum(d["balance"] for d in c.bench.accounts.find())
    plain_rate, _ = run(plain)
    print(json.dumps({
        "threads": THREADS, "seconds": SECONDS, "accounts": ACCOUNTS,
        "transfers_per_s": round(txn_rate, 1), "retried": retried,
        "sum_unchanged": total == 100 * ACCOUNTS,
        "plain_pairs_per_s": round(plain_rate, 1),
        "cost_ratio": round(plain_rate / txn_rate, 2) if txn_rate else None,
    }))


main()
