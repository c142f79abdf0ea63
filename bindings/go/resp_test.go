package sluice

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func parseAll(t *testing.T, in string) ([]Reply, error) {
	t.Helper()
	r := bufio.NewReaderSize(strings.NewReader(in), 16) // small: lines cross the buffer
	var out []Reply
	for {
		rep, err := ReadReply(r)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rep)
	}
}

func TestReadReplyTypes(t *testing.T) {
	in := "+OK\r\n-ERR unknown rule 'x'\r\n:-42\r\n$3\r\na\r\n\r\n$0\r\n\r\n$-1\r\n*-1\r\n" +
		"*5\r\n:1\r\n:3\r\n:2\r\n:0\r\n:3600000\r\n*2\r\n*1\r\n+a\r\n$-1\r\n"
	got, err := parseAll(t, in)
	if err != nil {
		t.Fatal(err)
	}
	ints := func(v ...int64) []Reply {
		var r []Reply
		for _, n := range v {
			r = append(r, Reply{Kind: KindInt, Int: n})
		}
		return r
	}
	want := []Reply{
		{Kind: KindSimple, Str: "OK"},
		{Kind: KindError, Str: "ERR unknown rule 'x'"},
		{Kind: KindInt, Int: -42},
		{Kind: KindBulk, Str: "a\r\n"},
		{Kind: KindBulk, Str: ""},
		{Kind: KindNil},
		{Kind: KindNil},
		{Kind: KindArray, Elems: ints(1, 3, 2, 0, 3600000)},
		{Kind: KindArray, Elems: []Reply{{Kind: KindArray, Elems: []Reply{{Kind: KindSimple, Str: "a"}}}, {Kind: KindNil}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

// Every malformed input is a *ProtocolError (or a cut-short reply), never a panic or a reply.
func TestReadReplyRejects(t *testing.T) {
	cases := map[string]string{
		"unknown type":       "?x\r\n",
		"no CR":              "+OK\n",
		"empty line":         "\r\n",
		"bad integer":        ":12a\r\n",
		"plus sign":          ":+1\r\n",
		"empty integer":      ":\r\n",
		"integer overflow":   ":99999999999999999999\r\n",
		"negative bulk":      "$-2\r\n",
		"bulk over the cap":  "$67108865\r\n",
		"bulk without CRLF":  "$1\r\nab\r\n",
		"negative array":     "*-5\r\n",
		"array over the cap": "*1048577\r\n",
		"line over the cap":  "+" + strings.Repeat("a", MaxLineBytes+1) + "\r\n",
		"nested too deep":    strings.Repeat("*1\r\n", MaxDepth+1) + ":1\r\n",
		"CR in a string":     "+\r\r\n", // found by FuzzReadReply (testdata/fuzz)
		"CR in an error":     "-ERR a\rb\r\n",
	}
	for name, in := range cases {
		_, err := parseAll(t, in)
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("%s: got %v, want a protocol error", name, err)
		}
	}
	for _, in := range []string{"+OK", "$5\r\nab", "*2\r\n:1\r\n", "$3\r\nabc"} {
		if _, err := parseAll(t, in); err != io.ErrUnexpectedEOF {
			t.Errorf("%q: got %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

// The limits hold at their edge: the largest line and the deepest nesting parse.
func TestReadReplyAtLimits(t *testing.T) {
	long := strings.Repeat("a", MaxLineBytes-1) // and the type byte
	got, err := parseAll(t, "+"+long+"\r\n"+strings.Repeat("*1\r\n", MaxDepth)+":7\r\n")
	if err != nil || len(got) != 2 || got[0].Str != long {
		t.Fatalf("got %d replies, %v", len(got), err)
	}
}

// A bulk length claimed but not sent allocates nothing up front: the read ends at the input's
// end with a cut-short error.
func TestReadReplyClaimedBulk(t *testing.T) {
	if _, err := parseAll(t, "$67108864\r\nshort"); err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v", err)
	}
}

func TestAppendCommand(t *testing.T) {
	got := string(AppendCommand(nil, "SL.ALLOW", "api", "u\r\n1", ""))
	want := "*4\r\n$8\r\nSL.ALLOW\r\n$3\r\napi\r\n$4\r\nu\r\n1\r\n$0\r\n\r\n"
	if got != want {
		t.Fatalf("got %q", got)
	}
}

// FuzzReadReply: no input makes the parser panic or loop; every reply it accepts encodes back
// to bytes that parse to the same reply (the codec is its own inverse on what it accepts).
func FuzzReadReply(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "-ERR x\r\n", ":1\r\n", "$3\r\nabc\r\n", "$-1\r\n",
		"*5\r\n:1\r\n:3\r\n:2\r\n:0\r\n:9\r\n", "*1\r\n*1\r\n*0\r\n", "*-1\r\n", "$1\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		for i := 0; i < len(in)+1; i++ { // each reply eats at least 3 bytes
			rep, err := ReadReply(r)
			if err != nil {
				return
			}
			enc, err := AppendReply(nil, rep)
			if err != nil {
				t.Fatalf("a parsed reply does not encode: %+v: %v", rep, err)
			}
			back, err := ReadReply(bufio.NewReader(bytes.NewReader(enc)))
			if err != nil || !reflect.DeepEqual(back, rep) {
				t.Fatalf("round trip of %q: %+v then %+v (%v)", enc, rep, back, err)
			}
		}
		t.Fatalf("more replies than bytes in %q", in)
	})
}
