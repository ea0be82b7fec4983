"""The partition walkthrough of the Cloudant docs (shared seeds, 003) with the IBM Cloudant
Python SDK at its default settings (request bodies gzip-compressed), against Bunko.

The service is configured from the environment as users configure it: CLOUDANT_URL,
CLOUDANT_AUTH_TYPE=BASIC, CLOUDANT_USERNAME, CLOUDANT_PASSWORD. Prints one `ok <step>` line
per checked step and `ALL OK` at the end; any failed check raises (non-zero exit).
"""

from ibmcloudant.cloudant_v1 import BulkDocs, CloudantV1, Document

DB = "readings"
DEVICE = "device-123456"
READINGS = [
    ("bridge-9876:device-123456-20181211T11:13:24.123456Z", DEVICE, "20181211T11:13:24.123456Z", 12),
    ("bridge-9876:device-123456-20181213T09:00:00.000000Z", DEVICE, "20181213T09:00:00.000000Z", 14),
    ("bridge-9876:device-555-20181213T10:00:00.000000Z", "device-555", "20181213T10:00:00.000000Z", 9),
    ("bridge-1234:device-777-20181213T08:00:00.000000Z", "device-777", "20181213T08:00:00.000000Z", 3),
]


def check(step, condition, detail=None):
    if not condition:
        raise AssertionError(f"{step}: {detail!r}")
    print(f"ok {step}", flush=True)


def main():
    service = CloudantV1.new_instance()
    check("gzip request bodies on", service.get_enable_gzip_compression())

    created = service.put_database(db=DB, partitioned=True).get_result()
    check("put_database partitioned", created == {"ok": True}, created)
    info = service.get_database_information(db=DB).get_result()
    check("database is partitioned", info["props"].get("partitioned") is True, info)

    docs = [
        Document(
            _id=doc_id,
            deviceID=device,
            infrastructureID=doc_id.split(":")[0],
            ts=ts,
            reading={"temperature": {"value": value, "unit": "c"}},
        )
        for doc_id, device, ts, value in READINGS
    ]
    saved = service.post_bulk_docs(db=DB, bulk_docs=BulkDocs(docs=docs)).get_result()
    check("post_bulk_docs", all(r.get("ok") for r in saved) and len(saved) == 4, saved)

    part = service.get_partition_information(db=DB, partition_key="bridge-9876").get_result()
    check("partition info", part["partition"] == "bridge-9876" and part["doc_count"] == 3, part)

    rows = service.post_partition_all_docs(
        db=DB, partition_key="bridge-9876", include_docs=True
    ).get_result()["rows"]
    check("partition _all_docs", [r["id"] for r in rows] == [r[0] for r in READINGS[:3]], rows)
    check("partition _all_docs docs", rows[0]["doc"]["reading"]["temperature"]["value"] == 12, rows)

    for name, fields in [("timestamped-readings", ["ts"]), ("deviceID-readings", ["deviceID", "ts"])]:
        index = {"fields": [{field: "asc"} for field in fields]}
        made = service.post_index(
            db=DB, index=index, name=name, type="json", partitioned=True
        ).get_result()
        check(f"post_index {name}", made["result"] in ("created", "exists") and made["name"] == name, made)

    found = service.post_partition_find(
        db=DB, partition_key="bridge-9876", selector={"ts": {"$gte": "20181213"}}
    ).get_result()
    ids = sorted(d["_id"] for d in found["docs"])
    check("partition _find today", ids == sorted([READINGS[1][0], READINGS[2][0]]), found)

    selector = {"deviceID": {"$eq": DEVICE}, "ts": {"$gte": "20181213"}}
    found = service.post_partition_find(db=DB, partition_key="bridge-9876", selector=selector).get_result()
    check("partition _find device today", [d["_id"] for d in found["docs"]] == [READINGS[1][0]], found)

    explained = service.post_partition_explain(
        db=DB, partition_key="bridge-9876", selector=selector
    ).get_result()
    check("partition _explain", explained["index"]["name"] == "deviceID-readings", explained)

    ddoc = {
        "options": {"partitioned": False},
        "views": {"by-device": {"map": "function(doc) { emit(doc.deviceID, doc.infrastructureID) }"}},
    }
    put = service.put_design_document(
        db=DB, ddoc="infrastructure-mapping", design_document=ddoc
    ).get_result()
    check("put_design_document global", put["ok"] is True, put)

    view = service.post_view(
        db=DB, ddoc="infrastructure-mapping", view="by-device", keys=[DEVICE], limit=1
    ).get_result()
    want = [{"id": READINGS[0][0], "key": DEVICE, "value": "bridge-9876"}]
    check("global view keys+limit", view["rows"] == want, view)

    ddoc = {"views": {"by-ts": {"map": "function(doc) { emit(doc.ts, doc.reading.temperature.value) }"}}}
    put = service.put_design_document(db=DB, ddoc="readings", design_document=ddoc).get_result()
    check("put_design_document partitioned", put["ok"] is True, put)
    view = service.post_partition_view(
        db=DB, partition_key="bridge-9876", ddoc="readings", view="by-ts", start_key="20181213"
    ).get_result()
    check("partitioned view", [r["value"] for r in view["rows"]] == [14, 9], view)

    changes = service.post_changes(db=DB).get_result()
    changed = {c["id"] for c in changes["results"]}
    want = {r[0] for r in READINGS} | {"_design/infrastructure-mapping", "_design/readings"}
    # Plus the two design documents that hold the Mango indexes.
    check("_changes", want <= changed and len(changed) == len(want) + 2, changes)
    check("_changes last_seq", changes["last_seq"] == changes["results"][-1]["seq"], changes)

    print("ALL OK", flush=True)


if __name__ == "__main__":
    main()
