import SinkiCLI
