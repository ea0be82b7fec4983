// The partition walkthrough of the Cloudant docs (shared seeds, 003) with the IBM Cloudant
// Node SDK at its default settings (request bodies gzip-compressed), against Bunko.
//
// Configured from the environment as users configure it: CLOUDANT_URL,
// CLOUDANT_AUTH_TYPE=BASIC, CLOUDANT_USERNAME, CLOUDANT_PASSWORD. Prints one `ok <step>` line
// per checked step and `ALL OK` at the end; a failed check exits non-zero.

'use strict';

const assert = require('node:assert/strict');
const { CloudantV1 } = require('@ibm-cloud/cloudant');

const DB = 'readings';
const DEVICE = 'device-123456';
const READINGS = [
  ['bridge-9876:device-123456-20181211T11:13:24.123456Z', DEVICE, '20181211T11:13:24.123456Z', 12],
  ['bridge-9876:device-123456-20181213T09:00:00.000000Z', DEVICE, '20181213T09:00:00.000000Z', 14],
  ['bridge-9876:device-555-20181213T10:00:00.000000Z', 'device-555', '20181213T10:00:00.000000Z', 9],
  ['bridge-1234:device-777-20181213T08:00:00.000000Z', 'device-777', '20181213T08:00:00.000000Z', 3],
];

function ok(step) {
  console.log(`ok ${step}`);
}

async function main() {
  const service = CloudantV1.newInstance({});
  assert.equal(service.baseOptions.enableGzipCompression, true);
  ok('gzip request bodies on');

  let res = await service.putDatabase({ db: DB, partitioned: true });
  assert.deepEqual(res.result, { ok: true });
  ok('putDatabase partitioned');

  const docs = READINGS.map(([id, device, ts, value]) => ({
    _id: id,
    deviceID: device,
    infrastructureID: id.split(':')[0],
    ts,
    reading: { temperature: { value, unit: 'c' } },
  }));
  res = await service.postBulkDocs({ db: DB, bulkDocs: { docs } });
  assert.equal(res.result.length, 4);
  assert.ok(res.result.every((r) => r.ok), JSON.stringify(res.result));
  ok('postBulkDocs');

  res = await service.getPartitionInformation({ db: DB, partitionKey: 'bridge-9876' });
  assert.equal(res.result.partition, 'bridge-9876', JSON.stringify(res.result));
  assert.equal(res.result.docCount, 3, JSON.stringify(res.result)); // the SDK camel-cases this model
  ok('partition info');

  res = await service.postPartitionAllDocs({ db: DB, partitionKey: 'bridge-9876', includeDocs: true });
  assert.deepEqual(res.result.rows.map((r) => r.id), READINGS.slice(0, 3).map((r) => r[0]));
  assert.equal(res.result.rows[0].doc.reading.temperature.value, 12);
  ok('partition _all_docs');

  for (const [name, fields] of [['timestamped-readings', ['ts']], ['deviceID-readings', ['deviceID', 'ts']]]) {
    const index = { fields: fields.map((f) => ({ [f]: 'asc' })) };
    res = await service.postIndex({ db: DB, index, name, type: 'json', partitioned: true });
    assert.ok(['created', 'exists'].includes(res.result.result), JSON.stringify(res.result));
    assert.equal(res.result.name, name);
    ok(`postIndex ${name}`);
  }

  res = await service.postPartitionFind({
    db: DB, partitionKey: 'bridge-9876', selector: { ts: { $gte: '20181213' } },
  });
  assert.deepEqual(res.result.docs.map((d) => d._id).sort(), [READINGS[1][0], READINGS[2][0]].sort());
  ok('partition _find today');

  const selector = { deviceID: { $eq: DEVICE }, ts: { $gte: '20181213' } };
  res = await service.postPartitionFind({ db: DB, partitionKey: 'bridge-9876', selector });
  assert.deepEqual(res.result.docs.map((d) => d._id), [READINGS[1][0]]);
  ok('partition _find device today');

  res = await service.postPartitionExplain({ db: DB, partitionKey: 'bridge-9876', selector });
  assert.equal(res.result.index.name, 'deviceID-readings');
  ok('partition _explain');

  res = await service.putDesignDocument({
    db: DB,
    ddoc: 'infrastructure-mapping',
    designDocument: {
      options: { partitioned: false },
      views: { 'by-device': { map: 'function(doc) { emit(doc.deviceID, doc.infrastructureID) }' } },
    },
  });
  assert.equal(res.result.ok, true);
  ok('putDesignDocument global');

  res = await service.postView({
    db: DB, ddoc: 'infrastructure-mapping', view: 'by-device', keys: [DEVICE], limit: 1,
  });
  assert.deepEqual(res.result.rows, [{ id: READINGS[0][0], key: DEVICE, value: 'bridge-9876' }]);
  ok('global view keys+limit');

  res = await service.putDesignDocument({
    db: DB,
    ddoc: 'readings',
    designDocument: {
      views: { 'by-ts': { map: 'function(doc) { emit(doc.ts, doc.reading.temperature.value) }' } },
    },
  });
  assert.equal(res.result.ok, true);
  res = await service.postPartitionView({
    db: DB, partitionKey: 'bridge-9876', ddoc: 'readings', view: 'by-ts', startKey: '20181213',
  });
  assert.deepEqual(res.result.rows.map((r) => r.value), [14, 9]);
  ok('partitioned view');

  res = await service.postChanges({ db: DB });
  const changed = new Set(res.result.results.map((c) => c.id));
  for (const id of [...READINGS.map((r) => r[0]), '_design/infrastructure-mapping', '_design/readings']) {
    assert.ok(changed.has(id), id);
  }
  assert.equal(changed.size, READINGS.length + 4); // plus the two Mango index design documents
  assert.equal(res.result.lastSeq, res.result.results.at(-1).seq, JSON.stringify(res.result));
  ok('_changes');

  console.log('ALL OK');
}

main().catch((err) => {
  console.error(err && err.body ? `${err.message}: ${err.body}` : err);
  process.exit(1);
});
