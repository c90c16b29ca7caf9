package proxy

import "github.com/vnetlab/vnetlab/internal/dataplane/servicemap"

// The sync of the translated entries into the node's maps is the one
// Service map reconciler, shared with the labs' eBPF providers
// (internal/dataplane/servicemap).
type (
	Key     = servicemap.Key
	Entries = servicemap.Entries
	Plane   = servicemap.Plane
	Changes = servicemap.Changes
	Syncer  = servicemap.Syncer
)

// NewSyncer reads the plane's current entries.
var NewSyncer = servicemap.NewSyncer
