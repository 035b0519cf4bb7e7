// Package shapes gives the test program a second package and file in the pcln file table.
package shapes

import "math"

type Shape interface {
	Area() float64
	Name() string
	Sides() int
}

type Rect struct{ w, h float64 }

func NewRect(w, h float64) *Rect { return &Rect{w: w, h: h} }

func (r *Rect) Area() float64 { return r.w * r.h }
func (r *Rect) Name() string  { return "rect" }
func (r *Rect) Sides() int    { return 4 }

type Circle struct{ r float64 }

func NewCircle(r float64) *Circle { return &Circle{r: r} }

func (c *Circle) Area() float64 { return math.Pi * c.r * c.r }
func (c *Circle) Name() string  { return "circle" }
func (c *Circle) Sides() int    { return 0 }
