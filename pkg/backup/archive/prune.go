package archive

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/openetcd/etcd-operator/pkg/backup"
)

// KeptSnapshot is a full snapshot that stays after the snapshots' retention
// ran: a point-in-time restore may start from it and replay the chunks after
// its revision.
type KeptSnapshot struct {
	Key string
	// Revision is the revision its name records; 0 when it cannot be read.
	Revision int64
}

// Expiry is which chunks may go, and why.
type Expiry struct {
	// Delete are the chunks no kept snapshot needs, by revision.
	Delete []Chunk
	// OldestKept is the kept snapshot with the lowest revision, which bounds
	// what stays; zero when Held.
	OldestKept KeptSnapshot
	// Held says that the rule could not be applied, so nothing may go; Reason
	// says why, and it is a problem for the user to look at.
	Held bool
	// Reason is why Delete goes, or why nothing does.
	Reason string
}

// Expired chooses the chunks under prefix, among the listed objects, that
// no kept snapshot needs. A restore starts from a kept snapshot at revision R
// and replays the chunks from R+1 on, so a chunk whose Last is below the
// oldest kept snapshot's revision serves no restore any more, and one that
// reaches it or beyond stays. Besides:
//   - when a kept snapshot's revision is unknown, which one is the oldest is
//     unknown too, and nothing goes;
//   - when no snapshot is kept, the chunks are all there is, and nothing goes;
//   - the newest chunk always stays: the archiver resumes after the newest
//     chunk it finds, and without one it would go back to the snapshot it
//     started from and store again what was deleted;
//   - an object whose name is not a chunk's, as ChunkName writes it, is not
//     the archive's to delete, whatever it holds.
//
// It reads nothing but the names, so the same listing gives the same answer
// on every run and after every restart.
func Expired(prefix string, objects []backup.ObjectInfo, kept []KeptSnapshot) Expiry {
	if len(kept) == 0 {
		return Expiry{Held: true, Reason: "no full snapshot is kept, so the archive's chunks are all there is to restore from"}
	}
	oldest := kept[0]
	for _, s := range kept {
		if s.Revision <= 0 {
			return Expiry{Held: true, Reason: fmt.Sprintf("the revision of the kept snapshot %s cannot be read from its name, so which chunks it needs is unknown", s.Key)}
		}
		if s.Revision < oldest.Revision {
			oldest = s
		}
	}
	var chunks []Chunk
	for _, o := range objects {
		if c, ok := ParseChunkName(prefix, o); ok {
			chunks = append(chunks, c)
		}
	}
	// By Last, so that the newest chunk, the archiver's resume point, is the last.
	sort.Slice(chunks, func(i, j int) bool {
		if chunks[i].Last != chunks[j].Last {
			return chunks[i].Last < chunks[j].Last
		}
		return chunks[i].Key < chunks[j].Key
	})
	e := Expiry{OldestKept: oldest}
	for i, c := range chunks {
		if c.Last >= oldest.Revision || i == len(chunks)-1 {
			break
		}
		e.Delete = append(e.Delete, c)
	}
	if len(e.Delete) == 0 {
		e.Reason = fmt.Sprintf("every chunk reaches revision %d of the oldest kept snapshot %s, or is the newest", oldest.Revision, oldest.Key)
		return e
	}
	e.Reason = fmt.Sprintf("they end before revision %d of the oldest kept snapshot %s, where every restore now starts", oldest.Revision, oldest.Key)
	return e
}

// Prune lists the chunks under prefix and deletes those Expired chooses. It
// tries every deletion and reports all that failed, so one stuck object does
// not keep the others; deleted are the keys that went.
func Prune(ctx context.Context, store backup.Store, prefix string, kept []KeptSnapshot) (e Expiry, deleted []string, err error) {
	objs, err := store.List(ctx, prefix)
	if err != nil {
		return Expiry{}, nil, fmt.Errorf("list archive %q: %w", prefix, err)
	}
	e = Expired(prefix, objs, kept)
	var errs []error
	for _, c := range e.Delete {
		if err := store.Delete(ctx, c.Key); err != nil {
			errs = append(errs, fmt.Errorf("delete %q: %w", c.Key, err))
			continue
		}
		deleted = append(deleted, c.Key)
	}
	return e, deleted, errors.Join(errs...)
}
