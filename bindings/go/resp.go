package sluice

// resp.go - a RESP2 codec: commands out, replies in. No sockets here: ReadReply reads from any
// *bufio.Reader and AppendCommand / AppendReply append to a byte slice, so the parser runs the
// same over a connection, a bytes.Reader in a test, or a fuzzer's input.
//
// What one reply may cost is bounded by the limits below: a bulk string is read as it arrives
// (a length claimed but never sent allocates nothing up front), an array's elements are
// appended as they parse, and nesting is capped, so a hostile or broken server can make the
// parser hold at most about MaxBulkBytes per bulk and MaxArrayLen elements per array, never
// recurse without end.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Limits of one reply. sluiced's replies are a few hundred bytes; the admin commands' (a rules
// export) are larger but far below these.
const (
	MaxLineBytes = 64 << 10 // a simple string, an error or a length line, CRLF excluded
	MaxBulkBytes = 64 << 20 // one bulk string
	MaxArrayLen  = 1 << 20  // elements of one array
	MaxDepth     = 16       // arrays within arrays
)

// Kind is the type of a RESP2 reply.
type Kind uint8

// The reply types of RESP2. Nil stands for both the null bulk string ($-1) and the null array
// (*-1).
const (
	KindSimple Kind = iota + 1 // +OK
	KindError                  // -ERR ...
	KindInt                    // :42
	KindBulk                   // $3\r\nabc
	KindArray                  // *2\r\n...
	KindNil                    // $-1 or *-1
)

// Reply is one RESP2 reply. Str holds a simple string's, an error's or a bulk string's bytes,
// Int an integer's value, Elems an array's elements.
type Reply struct {
	Kind  Kind
	Int   int64
	Str   string
	Elems []Reply
}

// ProtocolError is a reply that is not RESP2 or passes a limit: the connection it came from
// cannot be trusted to be in step any more and is closed.
type ProtocolError struct{ Reason string }

func (e *ProtocolError) Error() string { return "sluice: protocol error: " + e.Reason }

func protoErr(format string, args ...interface{}) error {
	return &ProtocolError{Reason: fmt.Sprintf(format, args...)}
}

// ReadReply reads one whole reply from r. It returns a *ProtocolError for bytes that are not a
// reply, io.ErrUnexpectedEOF for a reply cut short, io.EOF when r ends before the reply's first
// byte, and r's own error otherwise. An error reply (-ERR ...) is a Reply of KindError, not an
// error: the caller decides what it means.
func ReadReply(r *bufio.Reader) (Reply, error) {
	return readReply(r, 0)
}

func readReply(r *bufio.Reader, depth int) (Reply, error) {
	line, err := readLine(r)
	if err != nil {
		if depth > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Reply{}, err
	}
	if len(line) == 0 {
		return Reply{}, protoErr("empty line where a reply was due")
	}
	body := line[1:]
	if bytes.IndexByte(body, '\r') >= 0 {
		return Reply{}, protoErr("a CR inside a line") // nothing RESP2 sends has one
	}
	switch line[0] {
	case '+':
		return Reply{Kind: KindSimple, Str: string(body)}, nil
	case '-':
		return Reply{Kind: KindError, Str: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		if err != nil {
			return Reply{}, err
		}
		return Reply{Kind: KindInt, Int: n}, nil
	case '$':
		return readBulk(r, body)
	case '*':
		return readArray(r, body, depth)
	}
	return Reply{}, protoErr("unknown reply type byte %q", line[0])
}

// readLine returns the next line without its CRLF. Its bytes are copied only when the line is
// longer than r's buffer; otherwise they stay valid until the next read from r.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull && len(long) <= MaxLineBytes+2 {
			line, err = r.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if err != nil && err != bufio.ErrBufferFull {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if len(line) > MaxLineBytes+2 {
		return nil, protoErr("a line longer than %d bytes", MaxLineBytes)
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoErr("a line that does not end in CRLF")
	}
	return line[:len(line)-2], nil
}

// parseInt reads a RESP integer: an optional '-' and decimal digits, nothing else.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 || b[0] == '+' {
		return 0, protoErr("bad integer %q", b)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, protoErr("bad integer %q", b)
	}
	return n, nil
}

func readBulk(r *bufio.Reader, lenText []byte) (Reply, error) {
	n, err := parseInt(lenText)
	if err != nil {
		return Reply{}, err
	}
	if n == -1 {
		return Reply{Kind: KindNil}, nil
	}
	if n < 0 || n > MaxBulkBytes {
		return Reply{}, protoErr("bulk length %d outside 0..%d", n, MaxBulkBytes)
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, n+2); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Reply{}, err
	}
	b := buf.Bytes()
	if b[n] != '\r' || b[n+1] != '\n' {
		return Reply{}, protoErr("bulk string of %d bytes not followed by CRLF", n)
	}
	return Reply{Kind: KindBulk, Str: string(b[:n])}, nil
}

func readArray(r *bufio.Reader, lenText []byte, depth int) (Reply, error) {
	n, err := parseInt(lenText)
	if err != nil {
		return Reply{}, err
	}
	if n == -1 {
		return Reply{Kind: KindNil}, nil
	}
	if n < 0 || n > MaxArrayLen {
		return Reply{}, protoErr("array length %d outside 0..%d", n, MaxArrayLen)
	}
	if depth+1 > MaxDepth {
		return Reply{}, protoErr("arrays nested deeper than %d", MaxDepth)
	}
	capHint := n
	if capHint > 64 {
		capHint = 64 // grown as elements arrive, not as claimed
	}
	elems := make([]Reply, 0, capHint)
	for i := int64(0); i < n; i++ {
		e, err := readReply(r, depth+1)
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return Reply{}, err
		}
		elems = append(elems, e)
	}
	return Reply{Kind: KindArray, Elems: elems}, nil
}

// AppendCommand appends args as a RESP2 command (an array of bulk strings) to buf.
func AppendCommand(buf []byte, args ...string) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, '\r', '\n')
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, '\r', '\n')
		buf = append(buf, a...)
		buf = append(buf, '\r', '\n')
	}
	return buf
}

// errUnencodable is AppendReply's answer for a reply RESP2 cannot carry.
var errUnencodable = errors.New("sluice: reply cannot be encoded")

// AppendReply appends rep as RESP2 to buf (what a server would send): the inverse of
// ReadReply. A simple string or error holding CR or LF cannot be encoded.
func AppendReply(buf []byte, rep Reply) ([]byte, error) {
	switch rep.Kind {
	case KindSimple, KindError:
		if bytes.ContainsAny([]byte(rep.Str), "\r\n") {
			return buf, errUnencodable
		}
		b := byte('+')
		if rep.Kind == KindError {
			b = '-'
		}
		buf = append(append(buf, b), rep.Str...)
		return append(buf, '\r', '\n'), nil
	case KindInt:
		buf = strconv.AppendInt(append(buf, ':'), rep.Int, 10)
		return append(buf, '\r', '\n'), nil
	case KindBulk:
		buf = strconv.AppendInt(append(buf, '$'), int64(len(rep.Str)), 10)
		buf = append(append(buf, '\r', '\n'), rep.Str...)
		return append(buf, '\r', '\n'), nil
	case KindNil:
		return append(buf, "$-1\r\n"...), nil
	case KindArray:
		buf = strconv.AppendInt(append(buf, '*'), int64(len(rep.Elems)), 10)
		buf = append(buf, '\r', '\n')
		var err error
		for _, e := range rep.Elems {
			if buf, err = AppendReply(buf, e); err != nil {
				return buf, err
			}
		}
		return buf, nil
	}
	return buf, errUnencodable
}
