package etcdutil

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// DowngradeInfo is the state of etcd 3.6's downgrade: once enabled, the
// cluster runs the target (previous minor) version's protocol and members
// may be replaced by that version's binary one at a time.
type DowngradeInfo struct {
	Enabled       bool
	TargetVersion string
}

// Field numbers etcd 3.6 added to StatusResponse (api/etcdserverpb/rpc.proto).
// The operator's etcd API module is 3.5's, which keeps fields it does not
// know as unrecognised bytes; reading them here spares a move of the whole
// module graph to etcd 3.6 while still seeing a 3.6 member's storage
// version, quota and downgrade state.
const (
	statusFieldStorageVersion = 11
	statusFieldDBSizeQuota    = 12
	statusFieldDowngradeInfo  = 13

	downgradeFieldEnabled       = 1
	downgradeFieldTargetVersion = 2
)

// statusFieldsOf36 decodes the 3.6 fields of a StatusResponse from its
// unrecognised bytes. Anything malformed is ignored: these fields only
// enrich a report and must never make a member look unreachable.
func statusFieldsOf36(b []byte) (storageVersion string, quota int64, downgrade DowngradeInfo) {
	forEachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
		switch {
		case num == statusFieldStorageVersion && typ == protowire.BytesType:
			storageVersion = string(v)
		case num == statusFieldDBSizeQuota && typ == protowire.VarintType:
			quota = int64(n)
		case num == statusFieldDowngradeInfo && typ == protowire.BytesType:
			forEachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) {
				switch {
				case num == downgradeFieldEnabled && typ == protowire.VarintType:
					downgrade.Enabled = n != 0
				case num == downgradeFieldTargetVersion && typ == protowire.BytesType:
					downgrade.TargetVersion = string(v)
				}
			})
		}
	})
	return storageVersion, quota, downgrade
}

// forEachField calls fn with each varint or length-delimited field of a
// protobuf message; other wire types are skipped. It stops at the first
// malformed byte.
func forEachField(b []byte, fn func(num protowire.Number, typ protowire.Type, bytes []byte, varint uint64)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return
			}
			fn(num, typ, nil, v)
			b = b[n:]
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return
			}
			fn(num, typ, v, 0)
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return
			}
			b = b[n:]
		}
	}
}
