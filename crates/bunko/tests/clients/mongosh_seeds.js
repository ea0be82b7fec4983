// The shared seeds' MongoDB models, typed into mongosh as the guides write them (issue 13):
// embedded addresses and the subset pattern (seed 001), the single-collection `links` model
// with its compound index (seed 002), parent references with an index and `$lookup`
// (seed 004), plus the shell helpers people use around them (`db.stats()`, `coll.stats()`,
// `getIndexes()`, `countDocuments()`, `rs.status()`...).
//
// Run by crates/bunko/tests/e2e/clients.rs as `mongosh <uri> --quiet --file mongosh_seeds.js`
// at mongosh's default settings. Prints one `ok <step>` line per checked step and `ALL OK`
// at the end; a failed check throws, which makes mongosh exit non-zero.

const assert = require('assert');

// The shell's documents and arrays come from another realm than `assert`'s, so deep
// comparisons go through Extended JSON (which also tells int32 from double).
function eq(actual, expected) {
  assert.strictEqual(EJSON.stringify(actual), EJSON.stringify(expected));
}

function step(name) {
  print(`ok ${name}`);
}

function ixscan(explained) {
  const plan = JSON.stringify(explained.queryPlanner.winningPlan);
  assert.ok(plan.includes('"IXSCAN"'), plan);
  return explained.queryPlanner.winningPlan;
}

const seeds = db.getSiblingDB('seeds');
seeds.dropDatabase();

// Seed 001: one patron with embedded addresses, read back in one query.
seeds.patrons.insertOne({
  _id: 'joe',
  name: 'Joe Bookreader',
  addresses: [
    { street: '123 Fake Street', city: 'Faketon', state: 'MA', zip: '12345' },
    { street: '1 Some Other Street', city: 'Boston', state: 'MA', zip: '12345' },
  ],
});
const joe = seeds.patrons.findOne({ 'addresses.city': 'Boston' });
assert.strictEqual(joe.name, 'Joe Bookreader');
eq(joe.addresses.map((a) => a.city), ['Faketon', 'Boston']);
const streets = seeds.patrons.findOne({ _id: 'joe' }, { 'addresses.street': 1, _id: 0 });
eq(streets, {
  addresses: [{ street: '123 Fake Street' }, { street: '1 Some Other Street' }],
});
step('embedded addresses');

// Seed 001, the subset pattern: every review goes to `reviews`, the product keeps the
// newest ten, newest first, with `$push` + `$each`/`$sort`/`$slice`.
seeds.products.insertOne({
  _id: 1,
  name: 'Super Widget',
  description: 'This is the most useful item in your toolbox.',
  price: { value: NumberDecimal('119.99'), currency: 'USD' },
  reviews: [],
});
const authors = ['Kristina', 'Trina', 'Pablo', 'Hans'];
for (let i = 0; i < 14; i++) {
  const review = {
    review_id: 773 + i,
    review_author: authors[i % authors.length],
    review_text: `review ${773 + i}`,
    published_date: new Date(Date.UTC(2019, 1, 4 + i)),
  };
  seeds.reviews.insertOne({ ...review, product_id: 1 });
  const pushed = seeds.products.updateOne(
    { _id: 1 },
    { $push: { reviews: { $each: [review], $sort: { published_date: -1 }, $slice: 10 } } },
  );
  assert.strictEqual(pushed.modifiedCount, 1);
}
const product = seeds.products.findOne({ _id: 1 });
assert.strictEqual(product.reviews.length, 10);
eq(
  product.reviews.map((r) => r.review_id),
  [786, 785, 784, 783, 782, 781, 780, 779, 778, 777],
);
assert.strictEqual(product.price.value.toString(), '119.99');
assert.ok(product.reviews[0].published_date instanceof Date);
assert.strictEqual(product.reviews[0].published_date.toISOString(), '2019-02-17T00:00:00.000Z');
assert.strictEqual(seeds.reviews.countDocuments({ product_id: 1 }), 14);
const older = seeds.reviews
  .find({ product_id: 1, review_id: { $lt: 777 } }, { review_id: 1, _id: 0 })
  .sort({ published_date: -1 })
  .toArray();
eq(older.map((r) => r.review_id), [776, 775, 774, 773]);
step('subset pattern');

// Seed 002: the single-collection pattern, its compound index, and both of its queries.
const sc = seeds.students_classes;
sc.insertMany([
  {
    _id: 'CS101-001',
    doc_type: 'class',
    class_name: 'Introduction to Programming',
    course_id: 'CS101',
    instructor: {
      name: 'Dr. Emily Smith',
      email: 'emily.smith@example.com',
      office_hours: 'Tuesdays and Thursdays 2:00 PM - 4:00 PM',
    },
    semester: 'Spring 2025',
    schedule: [
      { day_time: 'Monday 10:00 AM - 11:30 AM', location: 'Room 101, Science Building' },
      { day_time: 'Wednesday 10:00 AM - 11:30 AM', location: 'Room 101, Science Building' },
    ],
    current_topic: 'Loops and Iterations',
    next_class_time: '2025-01-09T10:00:00Z',
    links: [
      { target: 'CS101-001', doc_type: 'class' },
      { target: 'S10023', doc_type: 'student' },
      { target: 'S12345', doc_type: 'student' },
    ],
  },
  {
    _id: 'MATH201-002',
    doc_type: 'class',
    class_name: 'Calculus II',
    course_id: 'MATH201',
    links: [
      { target: 'MATH201-002', doc_type: 'class' },
      { target: 'S12345', doc_type: 'student' },
    ],
  },
  {
    _id: 'S12345',
    doc_type: 'student',
    name: 'Jane Doe',
    major: 'Computer Science',
    semester: 'Spring 2025',
    registered_classes: [
      { course_id: 'CS101', class_instance_id: 'CS101-001', class_name: 'Introduction to Programming' },
      { course_id: 'MATH201', class_instance_id: 'MATH201-002', class_name: 'Calculus II' },
    ],
    links: [
      { target: 'CS101-001', doc_type: 'class' },
      { target: 'MATH201-002', doc_type: 'class' },
      { target: 'S12345', doc_type: 'student' },
    ],
  },
  {
    _id: 'S10023',
    doc_type: 'student',
    name: 'John Roe',
    links: [
      { target: 'CS101-001', doc_type: 'class' },
      { target: 'S10023', doc_type: 'student' },
    ],
  },
]);
const indexName = sc.createIndex({ 'links.target': 1, 'links.doc_type': 1 });
assert.strictEqual(indexName, 'links.target_1_links.doc_type_1');
const names = sc.getIndexes().map((ix) => ix.name);
eq(names, ['_id_', 'links.target_1_links.doc_type_1']);
const jane = sc.find({ 'links.target': 'S12345' }).sort({ _id: 1 }).toArray();
eq(jane.map((d) => d._id), ['CS101-001', 'MATH201-002', 'S12345']);
const plan = ixscan(sc.find({ 'links.target': 'S12345' }).explain('executionStats'));
assert.ok(JSON.stringify(plan).includes('links.target_1_links.doc_type_1'));
const enrolled = sc.find({ doc_type: 'student', 'links.target': 'CS101-001' }).sort({ _id: 1 });
eq(enrolled.toArray().map((d) => d.name), ['John Roe', 'Jane Doe']);
const stats = sc.find({ 'links.target': 'S12345' }).explain('executionStats').executionStats;
assert.strictEqual(stats.nReturned, 3);
assert.strictEqual(stats.totalDocsExamined, 3);
step('links model with an index scan');

// Seed 004: courses by child reference, messages by parent reference with an index on it,
// and a student's messages joined with `$lookup`.
const sammyId = ObjectId('612d1e835ebee16872a109a4');
seeds.courses.insertMany([
  { _id: ObjectId('61741c9cbc9ec583c836170a'), name: 'Physics 101', department: 'Department of Physics', points: 7 },
  { _id: ObjectId('61741c9cbc9ec583c836170b'), name: 'Introduction to Cloud Computing', department: 'Department of Computer Science', points: 4 },
]);
seeds.students.insertOne({
  _id: sammyId,
  first_name: 'Sammy',
  last_name: 'Shark',
  emails: [
    { email: 'sammy@example.com', type: 'work' },
    { email: 'sammy@example.org', type: 'home' },
  ],
  courses: [ObjectId('61741c9cbc9ec583c836170a'), ObjectId('61741c9cbc9ec583c836170b')],
});
seeds.messages.insertMany([
  {
    _id: ObjectId('61741c9cbc9ec583c836174c'),
    subject: 'Books on kinematics and dynamics',
    message: 'Hello! Could you recommend a good introductory books covering the topics of kinematics and dynamics? Thanks!',
    posted_on: ISODate('2021-07-23T16:03:21Z'),
    posted_by: sammyId,
  },
  { subject: 'Study group', posted_on: ISODate('2021-07-24T09:00:00Z'), posted_by: sammyId },
  { subject: 'Someone else', posted_on: ISODate('2021-07-25T09:00:00Z'), posted_by: ObjectId() },
]);
assert.strictEqual(seeds.messages.createIndex({ posted_by: 1 }), 'posted_by_1');
const sammys = seeds.messages.find({ posted_by: sammyId }).sort({ posted_on: -1 }).toArray();
eq(sammys.map((m) => m.subject), ['Study group', 'Books on kinematics and dynamics']);
ixscan(seeds.messages.find({ posted_by: sammyId }).explain());
const sammy = seeds.students.findOne({ first_name: 'Sammy' });
const sammyCourses = seeds.courses.find({ _id: { $in: sammy.courses } }).sort({ points: -1 }).toArray();
eq(sammyCourses.map((c) => c.name), ['Physics 101', 'Introduction to Cloud Computing']);
step('parent references with an index');

const joined = seeds.students
  .aggregate([
    { $match: { _id: sammyId } },
    { $lookup: { from: 'messages', localField: '_id', foreignField: 'posted_by', as: 'messages' } },
    { $project: { first_name: 1, count: { $size: '$messages' } } },
  ])
  .toArray();
eq(joined, [{ _id: sammyId, first_name: 'Sammy', count: 2 }]);
step('$lookup');

// What people type around the models.
const dbs = db.adminCommand({ listDatabases: 1 }).databases.map((d) => d.name);
assert.ok(dbs.includes('seeds'), dbs);
const collections = seeds.getCollectionNames();
for (const name of ['courses', 'messages', 'patrons', 'products', 'reviews', 'students', 'students_classes']) {
  assert.ok(collections.includes(name), collections);
}
assert.strictEqual(seeds.stats().collections, collections.length);
assert.strictEqual(seeds.reviews.estimatedDocumentCount(), 14);
assert.strictEqual(seeds.reviews.countDocuments(), 14);
eq(seeds.reviews.distinct('review_author').sort(), authors.slice().sort());
assert.ok(db.version().startsWith('8.'));
assert.strictEqual(seeds.runCommand({ ping: 1 }).ok, 1);
// `stats()` and its shortcuts are `$collStats`; `rs.status()`/`rs.conf()` the one member.
const reviewStats = seeds.reviews.stats();
assert.strictEqual(reviewStats.ns, 'seeds.reviews');
assert.strictEqual(reviewStats.count, 14);
assert.strictEqual(reviewStats.nindexes, 1);
assert.ok(reviewStats.size > 0 && Number(seeds.reviews.dataSize()) === reviewStats.size);
assert.ok(Number(seeds.students_classes.totalIndexSize()) > 0);
assert.ok(Number(seeds.reviews.totalSize()) >= Number(seeds.reviews.storageSize()));
const status = rs.status();
assert.strictEqual(status.set, 'bunko');
eq(status.members.map((m) => m.stateStr), ['PRIMARY']);
assert.strictEqual(rs.conf().members.length, 1);
step('shell helpers');

print('ALL OK');
