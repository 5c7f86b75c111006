import Foundation
import LarderCLI

signal(SIGPIPE, SIG_IGN)
exit(LarderCLI.main())
