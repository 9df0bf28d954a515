package stream

import (
	"bytes"
	"math"
	"runtime"
	"strconv"
)

// _unknownG stands for a goroutine id goid could not read: any goroutine
// may be it.
const _unknownG = math.MaxUint64

// goid returns the id of the calling goroutine, read from the first line
// of its stack trace ("goroutine 18 [running]:"), or _unknownG if that
// line cannot be parsed. Go gives no other way to tell goroutines apart,
// and a Close must tell whether it is called from the OnDead call it
// would otherwise wait for (see GroupOptions.OnDead). It is called only
// on the paths around OnDead, never by Next, Ack or Publish.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b, ok := bytes.CutPrefix(b, []byte("goroutine "))
	if !ok {
		return _unknownG
	}
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		b = b[:i]
	}
	id, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil || id == 0 || id == _unknownG {
		return _unknownG
	}
	return id
}
