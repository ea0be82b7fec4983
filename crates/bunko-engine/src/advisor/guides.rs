//! The guides' rules the advisor checks, each in our own words with the guide it comes from
//! (the modeling guides Bunko's users read: MongoDB's schema-design and subset-pattern
//! pages, the Azure Cosmos DB modeling page, IBM Cloudant's partitioned-database guide).

use super::Guide;

pub const BOUNDED_ARRAYS: Guide = Guide {
    source: "MongoDB schema design guidelines; MongoDB subset pattern",
    rule: "Embed only what stays bounded: an array that grows without limit makes every read \
           and write of its document slower and ends at the size limit. Keep a bounded subset \
           (say the newest 10) embedded and put the rest in their own documents that refer \
           back to the parent, or reference the parent from the children.",
};

pub const DOCUMENT_SIZE: Guide = Guide {
    source: "MongoDB schema design guidelines (16 MB limit); Azure Cosmos DB data modeling",
    rule: "Stay far below the document size limit: large documents are read and written \
           whole, so fields that are rarely read together with the rest belong in documents \
           of their own that keep the working set small.",
};

pub const PARTITION_KEY: Guide = Guide {
    source: "IBM Cloudant partitioned databases: what makes a good partition key",
    rule: "A partition key needs many values (many small partitions beat a few large ones), \
           no hot spots (no partition taking most of the work), and repetition (several \
           documents that belong together per partition; one document per partition gains \
           nothing from partition queries). Statuses and dates are bad keys: a few statuses \
           make a few huge partitions, and today's date is a hot spot.",
};

pub const DISCRIMINATOR: Guide = Guide {
    source: "Azure Cosmos DB data modeling; MongoDB single-collection pattern",
    rule: "Documents of several entity types may share one container when a common field \
           (such as `type` or `doc_type`) says what each document is, so that queries and \
           indexes can select one type.",
};

pub const INDEX_FOLLOWED_FIELDS: Guide = Guide {
    source: "MongoDB schema design guidelines (parent references with an index); \
             MongoDB single-collection pattern (index on links.target, links.doc_type)",
    rule: "Index the fields queries select on and follow references by: a query without a \
           fitting index reads every document to return a few.",
};

pub const LEAN_INDEXES: Guide = Guide {
    source: "MongoDB schema design guidelines; IBM Cloudant query indexes",
    rule: "Every index is maintained by every write: keep the indexes queries use, and drop \
           those that duplicate another or that no query uses.",
};

pub const DENORMALIZED_COPIES: Guide = Guide {
    source: "Azure Cosmos DB data modeling (denormalization); MongoDB schema design guidelines",
    rule: "Copy a referenced document's fields into the referring one only when they rarely \
           change, and then keep every copy up to date when the source changes; data that \
           changes often is better referenced than copied.",
};

pub const READ_TOGETHER: Guide = Guide {
    source: "MongoDB schema design guidelines (embed what is read together); Azure Cosmos DB \
             data modeling",
    rule: "Model for the reads: what the application reads together belongs in one document \
           (or one request), not in a query followed by lookups of the documents it refers to.",
};
