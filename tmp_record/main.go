package main

import (
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/vnetlab/vnetlab/internal/profile"
)

func main() {
	d, _ := strconv.Atoi(os.Args[2])
	s, err := profile.Open(0)
	if err != nil {
		panic(err)
	}
	s.Start()
	time.Sleep(time.Duration(d) * time.Second)
	p, err := s.Stop()
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(p)
	os.WriteFile(os.Args[1], b, 0o644)
}
