module sonde.test/gosymentry

go 1.19
