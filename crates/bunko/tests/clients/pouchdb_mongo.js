// PouchDB replicating a MongoDB collection (issue 14, point 5): the collection `shop.books`
// is the database `shop$books`; PouchDB pulls what pymongo wrote (BSON-only types as
// canonical Extended JSON), edits a book locally, and pushes the edit back, which the
// calling test then reads with pymongo.
//
// BUNKO_URL (without credentials), BUNKO_USER, BUNKO_PASSWORD. Prints one `ok <step>` line
// per checked step and `ALL OK` at the end; a failed check exits non-zero.

'use strict';

const assert = require('node:assert/strict');
const PouchDB = require('pouchdb-core')
  .plugin(require('pouchdb-adapter-memory'))
  .plugin(require('pouchdb-adapter-http'))
  .plugin(require('pouchdb-replication'));

async function main() {
  const auth = { username: process.env.BUNKO_USER, password: process.env.BUNKO_PASSWORD };
  const remote = new PouchDB(`${process.env.BUNKO_URL}/shop%24books`, { auth });
  const local = new PouchDB('books', { adapter: 'memory' });

  const pulled = await local.replicate.from(remote);
  assert.equal(pulled.ok, true);
  const book = await local.get('b1');
  assert.equal(book.title, '吾輩は猫である');
  assert.deepEqual(book.pub, { $oid: '612d1e835ebee16872a109a4' });
  assert.deepEqual(book.published, { $date: { $numberLong: '-2051222400000' } });
  assert.deepEqual(book.copies, { $numberLong: '3' });
  console.log('ok pull a collection');

  book.stock = 7;
  await local.put(book);
  const pushed = await local.replicate.to(remote);
  assert.equal(pushed.ok, true);
  assert.equal(pushed.docs_written, 1);
  const remoteBook = await remote.get('b1');
  assert.equal(remoteBook.stock, 7);
  assert.ok(remoteBook._rev.startsWith('3-'), remoteBook._rev);
  console.log('ok push an edit back');
  console.log('ALL OK');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
