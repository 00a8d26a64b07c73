import BusymateCLI

@main
extension BusymateCommand {}
