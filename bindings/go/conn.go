package sluice

// conn.go - connections to sluiced and their pool. A round trip takes a connection (an idle one
// or a new one, at most Options.PoolSize open at once), writes every command of the call in one
// write, reads as many replies, and gives the connection back. A connection that failed in any
// way (I/O error, timeout, cancelled context, a reply that is not RESP) is closed, never reused:
// it may be out of step with its replies. A failed command is never sent again, since sluiced
// may have executed it.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

type conn struct {
	nc   net.Conn
	r    *bufio.Reader
	wbuf []byte
}

// UnreachableError is a call that could not reach sluiced or got no answer in time: refused or
// failed connect, a connection lost, a timeout. Options.OnUnreachable decides what a decision
// does then.
type UnreachableError struct {
	Addr string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("sluice: cannot reach sluiced at %s: %v", e.Addr, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ServerError is an error reply from sluiced; Msg is its text exactly ("ERR unknown rule 'x'").
type ServerError struct{ Msg string }

func (e *ServerError) Error() string { return e.Msg }

// getConn takes an idle connection or dials one, waiting for room in the pool until ctx ends.
func (c *Client) getConn(ctx context.Context) (*conn, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, c.ctxError(ctx.Err())
	}
	select {
	case cn := <-c.idle:
		return cn, nil
	default:
	}
	cn, err := c.dial(ctx)
	if err != nil {
		<-c.slots
		return nil, err
	}
	return cn, nil
}

// putConn gives cn back to the pool, or closes it when it failed (err != nil) or the client
// is closed.
func (c *Client) putConn(cn *conn, err error) {
	if err != nil || c.closed.Load() {
		cn.nc.Close()
	} else {
		select {
		case c.idle <- cn:
		default:
			cn.nc.Close()
		}
	}
	<-c.slots
}

func (c *Client) dial(ctx context.Context) (*conn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	nc, err := c.opts.Dial(dctx, "tcp", c.opts.Addr)
	if err != nil {
		return nil, c.ioError(ctx, err)
	}
	if c.opts.TLSConfig != nil {
		cfg := c.opts.TLSConfig.Clone()
		if cfg.ServerName == "" {
			host, _, _ := net.SplitHostPort(c.opts.Addr)
			cfg.ServerName = host
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			nc.Close()
			return nil, c.ioError(ctx, err)
		}
		nc = tc
	}
	cn := &conn{nc: nc, r: bufio.NewReader(nc)}
	if c.opts.Password != "" {
		args := []string{"AUTH", c.opts.Password}
		if c.opts.User != "" {
			args = []string{"AUTH", c.opts.User, c.opts.Password}
		}
		reps, err := c.exchange(ctx, cn, [][]string{args})
		if err == nil && reps[0].Kind == KindError {
			err = &ServerError{Msg: reps[0].Str}
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
	}
	return cn, nil
}

// roundTrip sends cmds in one write and returns their replies in order. An error reply is a
// Reply of KindError; the error is for the exchange as a whole.
func (c *Client) roundTrip(ctx context.Context, cmds [][]string) ([]Reply, error) {
	if c.closed.Load() {
		return nil, errClosed
	}
	cn, err := c.getConn(ctx)
	if err != nil {
		return nil, err
	}
	reps, err := c.exchange(ctx, cn, cmds)
	c.putConn(cn, err)
	return reps, err
}

// exchange writes cmds on cn and reads their replies, within the earlier of ctx's deadline and
// Options.Timeout; a cancelled ctx interrupts it.
func (c *Client) exchange(ctx context.Context, cn *conn, cmds [][]string) ([]Reply, error) {
	deadline := time.Now().Add(c.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cn.nc.SetDeadline(deadline)
	if done := ctx.Done(); done != nil {
		stop, exited := make(chan struct{}), make(chan struct{})
		defer func() { close(stop); <-exited }() // no deadline set after this returns
		go func() {
			defer close(exited)
			select {
			case <-done:
				cn.nc.SetDeadline(time.Unix(1, 0)) // wakes the read or write at once
			case <-stop:
			}
		}()
	}
	cn.wbuf = cn.wbuf[:0]
	for _, args := range cmds {
		cn.wbuf = AppendCommand(cn.wbuf, args...)
	}
	if _, err := cn.nc.Write(cn.wbuf); err != nil {
		return nil, c.ioError(ctx, err)
	}
	reps := make([]Reply, 0, len(cmds))
	for range cmds {
		rep, err := ReadReply(cn.r)
		if err != nil {
			return nil, c.ioError(ctx, err)
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

var errClosed = errors.New("sluice: client closed")

// ioError names what went wrong with the connection: the caller's cancellation as itself, a
// reply that is not RESP as a *ProtocolError, anything else (refused, reset, timed out, closed)
// as an *UnreachableError.
func (c *Client) ioError(ctx context.Context, err error) error {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return err
	}
	if ctx.Err() != nil {
		return c.ctxError(ctx.Err())
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return c.ctxError(context.DeadlineExceeded) // the connection's deadline fired first
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &UnreachableError{Addr: c.opts.Addr, Err: err}
}

// ctxError: a deadline that passed is a timeout (unreachable in time); a cancellation is the
// caller's own and is returned as it is.
func (c *Client) ctxError(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return &UnreachableError{Addr: c.opts.Addr, Err: err}
	}
	return err
}
