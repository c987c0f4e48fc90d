import Glibc
import SinkiCLI

exit(SinkidCommand.main(CommandLine.arguments))
