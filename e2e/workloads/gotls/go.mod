module sonde.test/gotls

go 1.19
