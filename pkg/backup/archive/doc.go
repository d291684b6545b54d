// Package archive ships every change an etcd cluster commits to an object
// store, in chunks, and replays those chunks onto a cluster restored from a
// full snapshot: the engine of point-in-time recovery. It is a library: the
// backup operator archives with it, and the restore operator and its seed pod
// replay with it (pkg/restore).
//
// # Watch, not WAL
//
// The Archiver watches the whole key space (every key from "\x00") from the
// revision after the last archived one. A watch is what any client may open,
// through any member, with the same TLS the snapshots use; it survives leader
// changes and member replacement by being opened again from the next
// revision; and it hands over committed changes only, in revision order, with
// every field a restore needs. Reading members' WAL files would need access to
// their volumes and raft's view of uncommitted entries.
//
// In a watch of the whole key space each revision is one write transaction
// with at least one event, since etcd bumps its revision only for a
// transaction that changed something: the revisions of the events received
// are therefore dense, and "archived up to the last event's revision" is
// exact. The watch responses' header revision, and the answers to progress
// requests, tell how far the cluster is ahead, which is the archive's lag.
//
// # Chunks
//
// A chunk holds the events of consecutive revisions First..Last, never part
// of a revision, so that a transaction stays whole; the next chunk starts at
// Last+1. It is closed when it has held events for Interval, or when it
// reaches MaxChunkBytes. Its object name carries First and Last (zero padded,
// so that names sort by revision), the time its last event was received, and
// the sha256 of the stored bytes (see ChunkName): a restore finds what it
// needs by listing, and finds a damaged object before it uses it.
//
// The stored bytes are the chunk's plain form through backup.Codec, the
// compression and encryption snapshots get. The plain form is:
//
//	magic "ETCDARC\x01"
//	records: uvarint length | received (int64 BE, Unix nanoseconds) | mvccpb.Event
//	trailer: uvarint 0 | First | Last | count (each int64 BE) | sha256 of all before it
//
// mvccpb.Event is etcd's own encoding of a watch event (type, key, value,
// create and mod revision, version, lease): it holds every field, old readers
// skip fields a newer etcd adds, and nothing needs to be kept in step with
// etcd's types by hand. The trailer makes a chunk cut short, or one whose
// bytes changed, fail to read, whatever codec it was stored with.
//
// # Gaps
//
// When the revision the archive needs next was compacted away (the archiver
// stood still longer than the cluster keeps history), Run returns a
// *GapError: the archive cannot be continued, only started again after a
// fresh full snapshot (GapError.RestartAfter).
package archive
