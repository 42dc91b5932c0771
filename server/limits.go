package server

import (
	"fmt"

	"github.com/mcp-sealer/sealer/internal/reasons"
)

// admit takes one of the server's in-flight slots, or refuses at once: past
// its capacity the sealer answers RESOURCE_EXHAUSTED quickly instead of
// letting every caller time out.
func (s *service) admit() error {
	if s.inFlight == nil {
		return nil
	}
	select {
	case s.inFlight <- struct{}{}:
		return nil
	default:
		return errBusy(cap(s.inFlight))
	}
}

func (s *service) release() {
	if s.inFlight != nil {
		<-s.inFlight
	}
}

func errBusy(limit int) error {
	return fmt.Errorf("%w: server busy, more than %d calls in flight", reasons.ErrResourceExhausted, limit)
}
