package main

import (
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "github.com/x448/float16"
	_ "golang.org/x/term"
	_ "gonum.org/v1/gonum/blas/gonum"
)

func main() {}
