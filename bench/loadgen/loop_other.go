//go:build !linux

package main

import (
	"errors"
	"time"
)

func run(config) ([]time.Duration, int, time.Duration, error) {
	return nil, 0, 0, errors.New("needs Linux (epoll and timerfd)")
}
