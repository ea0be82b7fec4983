// The MongoDB Node.js driver (npm `mongodb`, pinned) at its default settings against Bunko
// (issue 13): CRUD on the seeds' patrons, a session transaction with `withTransaction`, a
// change stream, and `bulkWrite`.
//
// MONGO_URL (with credentials). Prints one `ok <step>` line per checked step and `ALL OK` at
// the end; a failed check exits non-zero.

'use strict';

const assert = require('node:assert/strict');
const { MongoClient, ObjectId, Decimal128, Long } = require('mongodb');

async function crud(db) {
  const patrons = db.collection('patrons');
  const inserted = await patrons.insertOne({
    _id: 'joe',
    name: 'Joe Bookreader',
    addresses: [{ street: '123 Fake Street', city: 'Faketon', state: 'MA', zip: '12345' }],
  });
  assert.equal(inserted.insertedId, 'joe');
  const many = await patrons.insertMany([{ name: 'Ann', visits: Long.fromNumber(3) }, { name: 'Bo', visits: 1 }]);
  assert.equal(many.insertedCount, 2);
  assert.ok(many.insertedIds[0] instanceof ObjectId);
  const pushed = await patrons.updateOne(
    { _id: 'joe' },
    { $push: { addresses: { street: '1 Some Other Street', city: 'Boston', state: 'MA', zip: '12345' } } },
  );
  assert.equal(pushed.modifiedCount, 1);
  const joe = await patrons.findOne({ 'addresses.city': 'Boston' }, { projection: { _id: 0, name: 1 } });
  assert.deepEqual(joe, { name: 'Joe Bookreader' });
  const ann = await patrons.findOneAndUpdate({ name: 'Ann' }, { $inc: { visits: 1 } }, { returnDocument: 'after' });
  assert.equal(ann.visits.toString(), '4');
  const names = await patrons.find({}, { sort: { name: 1 }, batchSize: 1 }).map((p) => p.name).toArray();
  assert.deepEqual(names, ['Ann', 'Bo', 'Joe Bookreader']);
  assert.equal(await patrons.countDocuments({ visits: { $gte: 1 } }), 2);
  await assert.rejects(patrons.insertOne({ _id: 'joe' }), (err) => err.code === 11000 && /E11000 duplicate key/.test(err.message));
  const deleted = await patrons.deleteMany({ visits: { $exists: true } });
  assert.equal(deleted.deletedCount, 2);
  console.log('ok crud');
}

async function transaction(client, db) {
  const accounts = db.collection('accounts');
  await accounts.insertMany([{ _id: 'a', balance: 100 }, { _id: 'b', balance: 0 }]);
  const session = client.startSession();
  try {
    await session.withTransaction(async () => {
      await accounts.updateOne({ _id: 'a' }, { $inc: { balance: -30 } }, { session });
      await accounts.updateOne({ _id: 'b' }, { $inc: { balance: 30 } }, { session });
      const inside = await accounts.findOne({ _id: 'b' }, { session });
      assert.equal(inside.balance, 30);
    });
    await assert.rejects(
      session.withTransaction(async () => {
        await accounts.updateOne({ _id: 'a' }, { $inc: { balance: -1000 } }, { session });
        throw new Error('insufficient funds');
      }),
      /insufficient funds/,
    );
  } finally {
    await session.endSession();
  }
  const balances = await accounts.find().sort({ _id: 1 }).toArray();
  assert.deepEqual(balances, [{ _id: 'a', balance: 70 }, { _id: 'b', balance: 30 }]);
  console.log('ok withTransaction');
}

async function changeStream(db) {
  const orders = db.collection('orders');
  await orders.insertOne({ _id: 0, state: 'before the stream' });
  const stream = orders.watch([{ $match: { operationType: { $in: ['insert', 'update'] } } }], {
    fullDocument: 'updateLookup',
  });
  const events = [];
  const seen = (async () => {
    for await (const change of stream) {
      events.push(change);
      if (events.length === 2) break;
    }
  })();
  // The stream's cursor exists once its first aggregate returned; write after that.
  while (!stream.cursor || stream.cursor.id === undefined) {
    await new Promise((r) => setTimeout(r, 20));
  }
  await orders.insertOne({ _id: 1, state: 'new', total: Decimal128.fromString('19.99') });
  await orders.updateOne({ _id: 1 }, { $set: { state: 'paid' } });
  await seen;
  await stream.close();
  assert.equal(events[0].operationType, 'insert');
  assert.equal(events[0].fullDocument.total.toString(), '19.99');
  assert.equal(events[1].operationType, 'update');
  assert.deepEqual(events[1].updateDescription.updatedFields, { state: 'paid' });
  assert.equal(events[1].fullDocument.state, 'paid');
  assert.ok(events[1]._id, 'a resume token');
  console.log('ok change stream');
}

async function bulk(db) {
  const reviews = db.collection('reviews');
  const result = await reviews.bulkWrite([
    { insertOne: { document: { _id: 786, review_author: 'Kristina', product_id: 1 } } },
    { insertOne: { document: { _id: 785, review_author: 'Trina', product_id: 1 } } },
    { updateOne: { filter: { _id: 785 }, update: { $set: { review_text: 'Nice product. Slow shipping.' } } } },
    { updateMany: { filter: { product_id: 1 }, update: { $set: { checked: true } } } },
    { replaceOne: { filter: { _id: 1 }, replacement: { review_author: 'Hans', product_id: 1 }, upsert: true } },
    { deleteOne: { filter: { _id: 786 } } },
  ]);
  assert.equal(result.insertedCount, 2);
  assert.equal(result.matchedCount, 3);
  assert.equal(result.modifiedCount, 3);
  assert.equal(result.upsertedCount, 1);
  assert.equal(result.deletedCount, 1);
  assert.deepEqual(result.upsertedIds, { 4: 1 });
  await assert.rejects(
    reviews.bulkWrite([{ insertOne: { document: { _id: 2 } } }, { insertOne: { document: { _id: 785 } } }, { insertOne: { document: { _id: 3 } } }]),
    (err) => err.writeErrors.length === 1 && err.writeErrors[0].index === 1 && err.writeErrors[0].code === 11000,
  );
  const ids = await reviews.distinct('_id');
  assert.deepEqual(ids.sort((a, b) => a - b), [1, 2, 785]);
  console.log('ok bulkWrite');
}

async function main() {
  const client = new MongoClient(process.env.MONGO_URL);
  try {
    await client.connect();
    const db = client.db('node_seeds');
    await db.dropDatabase();
    await crud(db);
    await transaction(client, db);
    await changeStream(db);
    await bulk(db);
  } finally {
    await client.close();
  }
  console.log('ALL OK');
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
