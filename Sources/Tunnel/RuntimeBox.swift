/// The tunnel's runtime, for what is made before it and calls it later
/// (the Realtime commands reach the supervisor through its link).
actor RuntimeBox {
    private(set) var runtime: TunnelRuntime?
    func set(_ runtime: TunnelRuntime) { self.runtime = runtime }
}
