module sonde.test/gotlsfixture

go 1.19
