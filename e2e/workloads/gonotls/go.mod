module sonde.test/gonotls

go 1.19
