import Foundation
import LarderTestSupport
import Synchronization
import Testing

@testable import Larder

/// A staged blob's and a reader's descriptor is closed or handed over exactly once, whichever
/// threads race to discard, take or release it: a second close would close whatever file the
/// kernel gave the same number to meanwhile.
@Suite struct DescriptorOwnershipTests {
  /// Open descriptors of this process on files under `directory` (other tests run beside).
  private func openDescriptorCount(under directory: String) -> Int {
    let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return fds.filter { fd in
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)"))?.hasPrefix(directory + "/")
        == true
    }.count
  }

  private func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

  @Test func discardingAStagedBlobTwiceLeavesADescriptorReusedMeanwhileOpen() throws {
    let larder = try TestStore.temporary()
    let writer = try larder.files.makeWriter()
    try writer.write(Data("staged once".utf8))
    let staged = try writer.finish()
    #expect(staged.isStaged)
    staged.discard()
    #expect(!staged.isStaged)
    #expect(!FileManager.default.fileExists(atPath: try #require(staged.localPath)))
    // The kernel gives out the lowest free number, so this one is likely the staged blob's old one.
    let other = open("/dev/null", O_RDONLY | O_CLOEXEC)
    #expect(other >= 0)
    defer { close(other) }
    staged.discard()
    #expect(isOpen(other))
  }

  @Test func concurrentDiscardsCloseEachDescriptorOnce() throws {
    let larder = try TestStore.temporary()
    let sentinel = open("/dev/null", O_RDONLY | O_CLOEXEC)
    defer { close(sentinel) }
    let tmp = larder.blobs.tmpDirectory.path
    var staged: [StagedBlob] = []
    for i in 0..<64 {
      let writer = try larder.files.makeWriter()
      try writer.write(Data("content \(i)".utf8))
      staged.append(try writer.finish())
    }
    #expect(openDescriptorCount(under: tmp) == 64)
    let blobs = staged
    // Eight threads discard every blob at once; then the blobs themselves are released.
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      for blob in blobs { blob.discard() }
    }
    staged.removeAll()
    #expect(openDescriptorCount(under: tmp) == 0)
    #expect(isOpen(sentinel))
    #expect(POSIX.listDirectory(larder.blobs.tmpDirectory.path) == [])
  }

  @Test func aReaderHandsItsDescriptorToExactlyOneTaker() throws {
    let larder = try TestStore.temporary()
    let file = try larder.files.put(Data("read me".utf8))
    /// Races 16 takers; returns the one descriptor handed over, after the reader is released.
    func takeOnce() throws -> Int32? {
      let reader = try larder.files.open(file)
      #expect(try reader.read(0..<4) == Data("read".utf8))
      let taken = Mutex<[Int32]>([])
      DispatchQueue.concurrentPerform(iterations: 16) { _ in
        let fd = reader.takeDescriptor()
        if fd >= 0 { taken.withLock { $0.append(fd) } }
      }
      let fds = taken.withLock { $0 }
      #expect(fds.count == 1)
      // The reader can no longer read, and has nothing left to hand over.
      #expect(throws: LarderError.io(operation: "read", path: reader.path, errno: EBADF)) {
        try reader.read(0..<4)
      }
      #expect(reader.takeDescriptor() == -1)
      return fds.first
    }
    let fd = try #require(try takeOnce())
    defer { close(fd) }
    // Released, the reader closed nothing: the new owner still reads through the descriptor.
    #expect(isOpen(fd))
    var byte: UInt8 = 0
    #expect(pread(fd, &byte, 1, 0) == 1 && byte == UInt8(ascii: "r"))
  }
}
