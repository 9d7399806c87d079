//! Stream capture into graphs, in thread-local mode, and graph replay: a captured stream's work
//! becomes the graph's nodes instead of running; an instance replays them on any stream of its
//! context.

use super::streams::{Capture, Graph};
use super::{Code, Fault, Outcome, World, CAPTURING};

impl World {
    pub fn begin_capture(&mut self, stream: u64) -> Outcome<()> {
        if CAPTURING.get() != 0 {
            return Err(Fault::violation(
                Code::CaptureUnsupported,
                "this thread is capturing already",
            ));
        }
        let state = self
            .queues
            .streams
            .get_mut(&stream)
            .filter(|s| !s.null)
            .ok_or_else(|| {
                Fault::violation(
                    Code::CaptureUnsupported,
                    "capture on the legacy default stream or an unknown stream",
                )
            })?;
        state.capture = Some(Capture {
            nodes: Vec::new(),
            invalidated: None,
        });
        CAPTURING.set(stream);
        Ok(())
    }

    pub fn end_capture(&mut self, stream: u64) -> Outcome<u64> {
        if CAPTURING.get() != stream {
            return Err(Fault::violation(
                Code::CaptureWrongThread,
                format!("ending a capture of stream {stream:#x} this thread did not begin"),
            ));
        }
        CAPTURING.set(0);
        let state = self
            .queues
            .streams
            .get_mut(&stream)
            .ok_or_else(|| Fault::violation(Code::InvalidHandle, "no such stream"))?;
        let context = state.context;
        let capture = state
            .capture
            .take()
            .ok_or_else(|| Fault::violation(Code::InvalidValue, "the stream is not capturing"))?;
        if let Some(why) = capture.invalidated {
            return Err(Fault::violation(
                Code::CaptureInvalidated,
                format!("the capture was invalidated by {why}"),
            ));
        }
        let id = self.handle();
        self.queues.graphs.insert(
            id,
            Graph {
                context,
                nodes: capture.nodes,
            },
        );
        Ok(id)
    }

    pub fn instantiate(&mut self, graph: u64) -> Outcome<u64> {
        let source = self
            .queues
            .graphs
            .get(&graph)
            .ok_or_else(|| self.unknown(graph, "graph"))?;
        let copy = Graph {
            context: source.context,
            nodes: source.nodes.clone(),
        };
        let id = self.handle();
        self.queues.executables.insert(id, copy);
        Ok(id)
    }

    pub fn destroy_graph(&mut self, graph: u64) -> Outcome<()> {
        self.queues
            .graphs
            .remove(&graph)
            .ok_or_else(|| self.unknown(graph, "graph"))?;
        self.bury(graph, "graph");
        Ok(())
    }

    pub fn destroy_executable(&mut self, executable: u64) -> Outcome<()> {
        self.queues
            .executables
            .remove(&executable)
            .ok_or_else(|| self.unknown(executable, "graph instance"))?;
        self.bury(executable, "graph instance");
        Ok(())
    }

    pub fn launch_graph(&mut self, executable: u64, stream: u64) -> Outcome<usize> {
        let graph = self
            .queues
            .executables
            .get(&executable)
            .ok_or_else(|| self.unknown(executable, "graph instance"))?;
        let (context, nodes) = (graph.context, graph.nodes.clone());
        let stream = self.stream_in(stream, context)?;
        let count = nodes.len();
        for node in nodes {
            self.enqueue(stream, node)?;
        }
        Ok(count)
    }
}
