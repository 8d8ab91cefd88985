//go:build !unix

package resp

import "context"

// watchClose cannot peek at the socket here: a blocked command ends only
// with its own timeout or the server's Close.
func (c *client) watchClose(parent context.Context) (context.Context, func()) {
	return context.WithCancel(parent)
}
