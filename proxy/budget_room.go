package proxy

import "bytes"

// The room an answer takes beside its own bytes while the proxy works on
// it, reserved before and given back after, so that the budget bounds the
// copies made on the way as well as what is held. They are bounds for the
// code as it is (parseObject copies what it parses; object.encode grows a
// buffer by doubling): change them with it.

// judgeRoom is the room that judging a message of n bytes takes:
// parseObject copies the message, and sealMessage parses its result, a
// copy again.
func judgeRoom(n int) int64 { return 2 * int64(n) }

// sealRoom is the room that sealing the state of the message data takes:
// its result and then the whole encoded anew, each in a buffer grown by
// doubling, and compacted, with the sealed state in place of the
// upstream's. None for a message that names no requestState and no
// inputRequests, escaped names included: sealMessage rewrites no other.
func (p *Proxy) sealRoom(data []byte) int64 {
	if !bytes.Contains(data, []byte("requestState")) && !bytes.Contains(data, []byte("inputRequests")) &&
		!bytes.Contains(data, []byte(`\u`)) {
		return 0
	}
	return 5*int64(len(data)) + int64(p.cfg.MaxStateBytes) + 4<<10
}

// keepRoom is the room that keeping the answer of x to be recorded takes,
// from a message of n bytes: outcomeOf parses a copy of it and encodes the
// answer kept, which stays held until it is recorded. None when x keeps
// none, or has kept its answer.
func (p *Proxy) keepRoom(x *exchange, n int) int64 {
	if x.opened == nil || !x.opened.Recording || x.answer != nil {
		return 0
	}
	return 3*int64(n) + 4<<10
}

// answerRoom is the most that one answer of max bytes may need at once:
// read, judged, sealed and kept (as readAnswer, judgeRoom, sealRoom and
// keepRoom reserve it).
func answerRoom(max, maxState int) int64 {
	n := int64(max)
	return n + judgeRoom(max) + 5*n + int64(maxState) + 4<<10 + 3*n + 4<<10
}
