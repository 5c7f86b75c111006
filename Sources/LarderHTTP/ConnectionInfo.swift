internal import CMicroHTTPD
import Foundation

/// `MHD_get_connection_info`, through the non-variadic wrapper in CMicroHTTPD's shim.
enum ConnectionInfo {
  static func function(_ connection: OpaquePointer?, _ type: MHD_ConnectionInfoType) -> UnsafePointer<MHD_ConnectionInfo>? {
    larder_mhd_connection_info(connection, type)
  }

  /// The peer address as text (`127.0.0.1`, `::1`), `""` when unknown.
  static func remoteAddress(_ connection: OpaquePointer?) -> String {
    guard let info = function(connection, .CONNECTION_INFO_CLIENT_ADDRESS),
      let address = info.pointee.client_addr
    else { return "" }
    return SocketAddress.text(address)
  }

  /// The status of the response queued on the connection (also one libmicrohttpd made
  /// itself, e.g. 431), or nil.
  static func queuedStatus(_ connection: OpaquePointer?) -> Int? {
    guard let info = function(connection, .CONNECTION_INFO_HTTP_STATUS) else { return nil }
    return Int(info.pointee.http_status)
  }
}
