package lab

import (
	"context"
	"fmt"
	"sync"
)

// workers is how many namespace operations run at once. Creating and
// removing namespaces mostly waits in the kernel (RCU grace periods), so
// more workers than this machine's 2 CPUs help.
const workers = 8

// inParallel runs fn on every name with a few workers and returns the
// first error (saying how many more there were). It stops handing out
// names once ctx is cancelled.
func inParallel(ctx context.Context, names []string, fn func(string) error) error {
	work := make(chan string)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := fn(n); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range names {
		if ctx.Err() != nil {
			break
		}
		work <- n
	}
	close(work)
	wg.Wait()
	switch len(errs) {
	case 0:
		return ctx.Err()
	case 1:
		return errs[0]
	}
	return fmt.Errorf("%w (and %d more errors like it)", errs[0], len(errs)-1)
}
