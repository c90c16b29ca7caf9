package netpolicy

// apply puts what a change tracker (resync.Changes) took into have (a nil
// record deletes); it says whether there was any.
func apply[T any](have map[string]*T, took map[string]*T) bool {
	for k, o := range took {
		if o == nil {
			delete(have, k)
		} else {
			have[k] = o
		}
	}
	return len(took) > 0
}
