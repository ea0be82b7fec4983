// nano (the CouchDB project's Node client) against Bunko: documents created, read, updated
// and deleted, a design-document view with keys and reduce, and `_changes`.
//
// BUNKO_URL_WITH_AUTH is the server with credentials (http://user:pass@host:port). Prints one
// `ok <step>` line per checked step and `ALL OK` at the end; a failed check exits non-zero.

'use strict';

const assert = require('node:assert/strict');
const nano = require('nano')(process.env.BUNKO_URL_WITH_AUTH);

function ok(step) {
  console.log(`ok ${step}`);
}

async function main() {
  await nano.db.create('books');
  const books = nano.use('books');
  ok('db.create');

  const created = await books.insert({ name: 'Azure Cosmos DB 101', 'pub-id': 'mspress', pages: 120 }, '1');
  assert.equal(created.ok, true);
  assert.match(created.rev, /^1-/);
  const read = await books.get('1');
  assert.equal(read.name, 'Azure Cosmos DB 101');
  ok('insert + get');

  const updated = await books.insert({ ...read, pages: 130 });
  assert.match(updated.rev, /^2-/);
  assert.equal((await books.get('1')).pages, 130);
  await assert.rejects(books.insert({ _id: '1', _rev: created.rev, pages: 1 }), (err) => err.statusCode === 409);
  ok('update + conflict');

  const bulk = await books.bulk({ docs: [
    { _id: '2', name: 'SQL Server 2019', 'pub-id': 'mspress', pages: 300 },
    { _id: '3', name: 'Dune', 'pub-id': 'chilton', pages: 412 },
  ] });
  assert.ok(bulk.every((r) => r.ok));
  const all = await books.list({ include_docs: true });
  assert.deepEqual(all.rows.map((r) => r.id), ['1', '2', '3']);
  assert.equal(all.rows[2].doc.name, 'Dune');
  ok('bulk + list');

  await books.insert({ views: { 'by-publisher': {
    map: "function(doc) { if (doc['pub-id']) emit(doc['pub-id'], doc.pages) }",
    reduce: '_sum',
  } } }, '_design/books');
  const rows = await books.view('books', 'by-publisher', { keys: ['mspress'], reduce: false });
  assert.deepEqual(rows.rows.map((r) => [r.id, r.value]), [['1', 130], ['2', 300]]);
  const sums = await books.view('books', 'by-publisher', { group: true });
  assert.deepEqual(sums.rows, [{ key: 'chilton', value: 412 }, { key: 'mspress', value: 430 }]);
  ok('view keys + reduce');

  const latest = await books.get('3');
  const gone = await books.destroy('3', latest._rev);
  assert.equal(gone.ok, true);
  await assert.rejects(books.get('3'), (err) => err.statusCode === 404);
  ok('destroy');

  const changes = await books.changes({ since: 0 });
  const byId = Object.fromEntries(changes.results.map((c) => [c.id, c]));
  assert.deepEqual(Object.keys(byId).sort(), ['1', '2', '3', '_design/books']);
  assert.equal(byId['3'].deleted, true);
  assert.equal(changes.last_seq, changes.results.at(-1).seq);
  ok('changes');

  // A longpoll waits for the next write and answers with it.
  const waiting = books.changes({ since: changes.last_seq, feed: 'longpoll', timeout: 60000 });
  await new Promise((resolve) => setTimeout(resolve, 200));
  await books.insert({ name: 'late' }, '4');
  const feed = await waiting;
  assert.deepEqual(feed.results.map((c) => c.id), ['4']);
  ok('changes longpoll');

  console.log('ALL OK');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
