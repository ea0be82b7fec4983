// PouchDB (in-memory local database, HTTP remote) replicating with Bunko both ways, with
// attachments each way, and with a conflict made on both sides, seen identically on both,
// and resolved.
//
// BUNKO_URL (without credentials), BUNKO_USER, BUNKO_PASSWORD. Prints one `ok <step>` line
// per checked step and `ALL OK` at the end; a failed check exits non-zero.

'use strict';

const assert = require('node:assert/strict');
const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-adapter-http'))
  .plugin(require('pouchdb-replication'));

function ok(step) {
  console.log(`ok ${step}`);
}

async function main() {
  const auth = { username: process.env.BUNKO_USER, password: process.env.BUNKO_PASSWORD };
  const remote = new PouchDB(`${process.env.BUNKO_URL}/pouch`, { auth });
  const local = new PouchDB('local', { adapter: 'memory' });

  const photo = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 1, 2, 255]);
  await local.bulkDocs([
    {
      _id: 'thomas',
      firstName: 'Thomas',
      addresses: [{ city: 'Seattle' }],
      _attachments: {
        'photo.png': { content_type: 'image/png', data: photo.toString('base64') },
        'notes/today.txt': { content_type: 'text/plain', data: Buffer.from('おはよう').toString('base64') },
      },
    },
    { _id: 'book-1', name: 'Azure Cosmos DB 101', 'pub-id': 'mspress' },
    { _id: 'shared', v: 'original' },
  ]);
  const pushed = await local.replicate.to(remote);
  assert.equal(pushed.ok, true);
  assert.equal(pushed.docs_written, 3);
  const remoteDocs = await remote.allDocs({ include_docs: true });
  assert.deepEqual(remoteDocs.rows.map((r) => r.id), ['book-1', 'shared', 'thomas']);
  assert.equal(remoteDocs.rows[2].doc.addresses[0].city, 'Seattle');
  ok('push to Bunko');
  const pushedPhoto = await remote.getAttachment('thomas', 'photo.png');
  assert.deepEqual(Buffer.from(pushedPhoto), photo);
  const pushedNotes = await remote.getAttachment('thomas', 'notes/today.txt');
  assert.equal(Buffer.from(pushedNotes).toString(), 'おはよう');
  const stub = (await remote.get('thomas'))._attachments['photo.png'];
  const localStub = (await local.get('thomas'))._attachments['photo.png'];
  assert.equal(stub.digest, localStub.digest, 'same digest on both sides');
  assert.equal(stub.length, photo.length);
  ok('attachments pushed to Bunko');

  const book2 = await remote.put({ _id: 'book-2', name: 'SQL Server 2019', 'pub-id': 'mspress' });
  const cover = Buffer.from('cover image bytes \u0000\u0001');
  await remote.putAttachment('book-2', 'cover.jpg', book2.rev, cover, 'image/jpeg');
  const pulled = await local.replicate.from(remote);
  assert.equal(pulled.ok, true);
  assert.equal((await local.get('book-2')).name, 'SQL Server 2019');
  ok('pull from Bunko');
  const pulledCover = await local.getAttachment('book-2', 'cover.jpg');
  assert.deepEqual(Buffer.from(pulledCover), cover);
  ok('attachments pulled from Bunko');

  const base = await local.get('shared');
  await local.put({ ...base, v: 'edited locally' });
  const remoteBase = await remote.get('shared');
  assert.equal(remoteBase._rev, base._rev);
  await remote.put({ ...remoteBase, v: 'edited on the server' });
  const synced = await local.sync(remote);
  assert.equal(synced.push.ok, true);
  assert.equal(synced.pull.ok, true);
  const here = await local.get('shared', { conflicts: true });
  const there = await remote.get('shared', { conflicts: true });
  assert.equal(here._rev, there._rev, 'both sides pick the same winner');
  assert.equal(here.v, there.v);
  assert.deepEqual(here._conflicts, there._conflicts);
  assert.equal(here._conflicts.length, 1);
  ok('conflict replicated both ways, same winner');

  await local.remove('shared', here._conflicts[0]);
  await local.sync(remote);
  const resolved = await remote.get('shared', { conflicts: true });
  assert.equal(resolved._conflicts, undefined);
  assert.equal(resolved.v, here.v);
  ok('conflict resolved and replicated');

  const info = await remote.info();
  assert.equal(info.doc_count, 4);
  console.log('ALL OK');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
