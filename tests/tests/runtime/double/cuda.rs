//! The runtime on the double's NVIDIA devices: discovery, the object each compute capability
//! gets and loads, every sample kernel launched with its arguments where the image reads them,
//! streams, events, graphs, pinned, managed and peer memory, occupancy.

use super::Double;
use gpu_embed::{Device, DeviceBuffer, PinnedBuffer, Vendor};

fn cuda_devices() -> Vec<Device> {
    Device::all()
        .into_iter()
        .filter(|d| d.vendor() == Vendor::Nvptx)
        .collect()
}

/// vadd's operands on `device`: `a` of ones, `b` of twos, `c` zeroed, `n` floats each, and a
/// launch over them.
fn vadd_operands(device: &Device, n: usize) -> ([DeviceBuffer<f32>; 3], gpu_embed::LaunchConfig) {
    let buffers = [
        DeviceBuffer::from_slice(device, &vec![1.0f32; n]).unwrap(),
        DeviceBuffer::from_slice(device, &vec![2.0f32; n]).unwrap(),
        DeviceBuffer::<f32>::alloc(device, n).unwrap(),
    ];
    (buffers, gpu_embed::LaunchConfig::for_elements(n, 256))
}

#[test]
fn devices_are_discovered_with_their_limits() {
    let double = Double::new("cuda_devices");
    if super::here(
        &double,
        module_path!(),
        "devices_are_discovered_with_their_limits",
    ) {
        let devices = cuda_devices();
        let arches: Vec<String> = devices.iter().map(|d| d.arch().arch).collect();
        assert_eq!(arches, ["sm_90", "sm_80"]);
        assert_eq!(devices[0].limits().max_threads_per_block, 1024);
        assert!(
            devices[0].name().contains("double"),
            "{}",
            devices[0].name()
        );
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["call cuInit"]);
    // Discovery alone makes no context.
    assert!(
        record.starting("kept Cuda device").is_empty(),
        "{:#?}",
        record.lines
    );
}

#[test]
fn every_sample_kernel_loads_its_cubin_and_launches_as_the_image_reads_it() {
    let double = Double::new("cuda_sample");
    if super::here(
        &double,
        module_path!(),
        "every_sample_kernel_loads_its_cubin_and_launches_as_the_image_reads_it",
    ) {
        for device in cuda_devices() {
            for (kernel, run) in sample_project::run_all(&device) {
                let run = run.unwrap_or_else(|e| panic!("{kernel} on {}: {e}", device.arch().arch));
                assert!(
                    run.object.contains(&device.arch().arch.clone()),
                    "{}",
                    run.object
                );
            }
        }
        return;
    }
    let record = double.record();
    record.assert_clean();
    for chip in ["sm_90", "sm_80"] {
        record.assert_has(&["loaded module", &format!("cubin {chip}")]);
    }
    // saxpy(a: f32, x: ptr, y: ptr, n: i64) as the cubin's parameter table lays it out.
    record.assert_has(&[
        "launch kernel=saxpy image=cubin sm_90",
        "params(32 bytes)=[4B 0x40200000, ptr 0xc0de",
        "8B 0x100000]",
    ]);
    let launches = record.starting("launch ");
    assert!(launches.len() >= 14, "{launches:#?}");
}

#[test]
fn a_newer_device_jits_the_ptx_and_a_later_minor_takes_its_majors_cubin() {
    let double = Double::new("cuda_ptx").with("GPU_DOUBLE_CUDA_DEVICES", "sm_100,sm_86");
    if super::here(
        &double,
        module_path!(),
        "a_newer_device_jits_the_ptx_and_a_later_minor_takes_its_majors_cubin",
    ) {
        for device in cuda_devices() {
            sample_project::run_vadd(&device).unwrap();
        }
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["launch kernel=vadd image=ptx", "sm_90"]);
    record.assert_has(&["launch kernel=vadd image=cubin sm_80"]);
}

#[test]
fn copies_fills_streams_events_and_pinned_memory_keep_their_order() {
    let double = Double::new("cuda_streams");
    if super::here(
        &double,
        module_path!(),
        "copies_fills_streams_events_and_pinned_memory_keep_their_order",
    ) {
        let device = &cuda_devices()[0];
        let (first, second) = (
            device.create_stream().unwrap(),
            device.create_stream().unwrap(),
        );
        let data: Vec<u32> = (0..4096).collect();
        let buffer = DeviceBuffer::from_slice(device, &data).unwrap();
        let copy = DeviceBuffer::<u32>::alloc(device, data.len()).unwrap();
        let (start, end) = (
            device.create_event().unwrap(),
            device.create_event().unwrap(),
        );
        first.record(&start).unwrap();
        first.fill(&buffer, 7).unwrap();
        first.record(&end).unwrap();
        second.wait(&end).unwrap();
        second.copy(&copy, &buffer).unwrap();
        let mut pinned = PinnedBuffer::<u32>::alloc(device, data.len()).unwrap();
        second.copy_device_to_pinned(&mut pinned, &copy).unwrap();
        assert!(pinned.as_slice().unwrap().iter().all(|&v| v == 7));
        assert!(start.elapsed(&end).unwrap().as_nanos() > 0);
        return;
    }
    double.record().assert_clean();
}

#[test]
fn managed_memory_is_one_address_for_the_host_and_the_device() {
    let double = Double::new("managed");
    if super::here(
        &double,
        module_path!(),
        "managed_memory_is_one_address_for_the_host_and_the_device",
    ) {
        let gpus = Device::gpus().unwrap();
        let vendors = [Vendor::Nvptx, Vendor::Amdgpu];
        for device in gpus.iter().filter(|d| vendors.contains(&d.vendor())) {
            let device = device.clone();
            let mut managed = DeviceBuffer::<u32>::alloc_managed(&device, 1000).unwrap();
            for (i, v) in managed.host_slice().unwrap().iter_mut().enumerate() {
                *v = i as u32;
            }
            let copy = DeviceBuffer::<u32>::alloc(&device, 1000).unwrap();
            let stream = device.create_stream().unwrap();
            stream.copy(&copy, &managed).unwrap();
            assert_eq!(copy.to_vec().unwrap(), (0..1000).collect::<Vec<u32>>());
        }
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["call cuMemAllocManaged", "flags=1"]);
    record.assert_has(&["call hipMallocManaged", "flags=1"]);
}

#[test]
fn an_old_driver_gets_the_ptx_it_compiles() {
    // CUDA 11.0 compiles PTX ISA 7.0 at most: for an sm_100 (no cubin of its major) the sample's
    // sm_90 PTX is ISA 7.8, its sm_80 PTX 7.0, so the runtime chooses sm_80's.
    let double = Double::new("old_driver")
        .with("GPU_DOUBLE_CUDA_VERSION", "11000")
        .with("GPU_DOUBLE_CUDA_DEVICES", "sm_100");
    if super::here(
        &double,
        module_path!(),
        "an_old_driver_gets_the_ptx_it_compiles",
    ) {
        sample_project::run_vadd(&cuda_devices()[0]).unwrap();
        return;
    }
    let record = double.record();
    record.assert_clean();
    record.assert_has(&["launch kernel=vadd image=ptx 7.0 sm_80"]);
}

#[test]
fn launches_copies_and_frees_are_traced_with_the_drivers_device() {
    let double = Double::new("tracing");
    if !super::here(
        &double,
        module_path!(),
        "launches_copies_and_frees_are_traced_with_the_drivers_device",
    ) {
        double.record().assert_clean();
        return;
    }
    let text = crate::tracing::traced(|| {
        sample_project::run_saxpy(&cuda_devices()[0]).unwrap();
    });
    for wanted in ["saxpy", "GPU driver double (sm_90)", "copy"] {
        assert!(text.contains(wanted), "no `{wanted}` in:\n{text}");
    }
}

#[test]
fn page_locked_copies_are_tracked_with_events_without_timing() {
    // The events that make host access wait for a page-locked copy are only waited for: made
    // without timing, which CUDA and HIP record and wait for more cheaply (issue 61, item 7).
    let double = Double::new("pinned_markers");
    if super::here(
        &double,
        module_path!(),
        "page_locked_copies_are_tracked_with_events_without_timing",
    ) {
        let device = &cuda_devices()[0];
        let stream = device.create_stream().unwrap();
        let data: Vec<u32> = (0..1024).collect();
        let staging = PinnedBuffer::from_slice(device, &data).unwrap();
        let on_device = DeviceBuffer::<u32>::alloc(device, data.len()).unwrap();
        stream.copy_pinned_to_device(&on_device, &staging).unwrap();
        let mut back = PinnedBuffer::<u32>::alloc(device, data.len()).unwrap();
        stream.copy_device_to_pinned(&mut back, &on_device).unwrap();
        assert_eq!(back.as_slice().unwrap(), data.as_slice());
        return;
    }
    let record = double.record();
    record.assert_clean();
    let timed: Vec<&str> = record
        .starting("call cuEventCreate(")
        .into_iter()
        .filter(|l| l.contains("flags=0)"))
        .collect();
    assert!(timed.is_empty(), "events with timing: {timed:#?}");
}

#[test]
fn a_program_using_one_gpu_of_four_holds_one_primary_context() {
    // Discovery retains no context; the first use of a device retains its primary context
    // (issue 61, item 4: discovery retained every GPU's).
    let double =
        Double::new("one_of_four").with("GPU_DOUBLE_CUDA_DEVICES", "sm_90,sm_90,sm_80,sm_80");
    if super::here(
        &double,
        module_path!(),
        "a_program_using_one_gpu_of_four_holds_one_primary_context",
    ) {
        let devices = cuda_devices();
        assert_eq!(devices.len(), 4);
        sample_project::run_vadd(&devices[2]).unwrap();
        return;
    }
    let record = double.record();
    record.assert_clean();
    let kept = record.starting("kept Cuda device");
    assert_eq!(
        kept,
        ["kept Cuda device 2's primary context, retained 1 times"],
        "{kept:#?}"
    );
}

#[test]
fn a_device_that_refuses_contexts_hides_no_other() {
    // Device 1 is in the prohibited compute mode, device 2 exclusive to another process: device 1
    // is passed over with the reason, device 2 listed and refused when used, device 0 works.
    let double = Double::new("refusing_device")
        .with("GPU_DOUBLE_CUDA_DEVICES", "sm_90,sm_90,sm_80")
        .with("GPU_DOUBLE_CUDA_PROHIBITED", "1")
        .with("GPU_DOUBLE_CUDA_BUSY", "2");
    if super::here(
        &double,
        module_path!(),
        "a_device_that_refuses_contexts_hides_no_other",
    ) {
        let devices = cuda_devices();
        assert_eq!(devices.len(), 2, "{:?}", Device::discovery_report());
        let passed_over = Device::passed_over().join("\n");
        assert!(
            passed_over.contains("CUDA device 1")
                && passed_over.contains("prohibited compute mode"),
            "{passed_over}"
        );
        sample_project::run_vadd(&devices[0]).unwrap();
        let error = DeviceBuffer::<u8>::alloc(&devices[1], 64).err().unwrap();
        assert!(
            error
                .to_string()
                .contains("cuDevicePrimaryCtxRetain (CUDA device 2)"),
            "{error}"
        );
        return;
    }
    double.record().assert_clean();
}

#[test]
fn launches_on_the_default_stream_cost_two_driver_calls_and_stay_ordered() {
    // A program with one stream, as cudarc's benchmark comparison runs it: each launch on the
    // default stream is a cuCtxGetCurrent and a cuLaunchKernel (no event recorded, no context
    // put back on a thread that had none). A stream made later still starts after those
    // launches (the legacy default stream's rule), and dropping a buffer they wrote waits for
    // them first: the double flags memory freed under queued work.
    let double = Double::new("default_stream_launches");
    if super::here(
        &double,
        module_path!(),
        "launches_on_the_default_stream_cost_two_driver_calls_and_stay_ordered",
    ) {
        let device = &cuda_devices()[0];
        let n = 4096;
        let ([a, b, c], config) = vadd_operands(device, n);
        for _ in 0..8 {
            // SAFETY: vadd reads a and b and writes c, all n elements long.
            unsafe { sample_project::vadd::vadd(device, &config, &a, &b, &c, n) }.unwrap();
        }
        let stream = device.create_stream().unwrap();
        let copy = DeviceBuffer::<f32>::alloc(device, n).unwrap();
        stream.copy(&copy, &c).unwrap();
        drop(c);
        stream.synchronize().unwrap();
        return;
    }
    let record = double.record();
    record.assert_clean();
    let launch = record
        .lines
        .iter()
        .position(|l| l.starts_with("call cuLaunchKernel("))
        .expect("a launch");
    // From the second launch to the eighth: nothing but the launches and their context checks.
    let between: Vec<&str> = record.lines[launch + 1..]
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("call "))
        .take(7 * 2)
        .collect();
    assert!(
        between.iter().all(
            |l| l.starts_with("call cuLaunchKernel(") || l.starts_with("call cuCtxGetCurrent(")
        ),
        "{between:#?}"
    );
    // The drop waited for the default stream before freeing.
    let synchronized = record
        .lines
        .iter()
        .position(|l| l.starts_with("call cuStreamSynchronize(stream=0x0)"))
        .expect("the default stream synchronized");
    let freed = record
        .lines
        .iter()
        .rposition(|l| l.starts_with("call cuMemFree_v2("))
        .expect("a buffer freed");
    assert!(synchronized < freed);
}

#[test]
fn a_driver_graph_replay_waits_for_other_streams_and_marks_once() {
    // Three launches of vadd captured into the driver's graph: a replay on another stream than
    // the one that last wrote `a` makes the replaying stream wait for that write before the
    // graph, and marks the graph's buffers with one event after it (not one per launch); a
    // replay after one of its buffers was dropped is an error before anything is queued.
    let double = Double::new("graph_replay");
    if super::here(
        &double,
        module_path!(),
        "a_driver_graph_replay_waits_for_other_streams_and_marks_once",
    ) {
        let device = &cuda_devices()[0];
        let n = 4096;
        let ([a, b, c], config) = vadd_operands(device, n);
        let (replaying, writing) = (
            device.create_stream().unwrap(),
            device.create_stream().unwrap(),
        );
        replaying.begin_capture().unwrap();
        for _ in 0..3 {
            // SAFETY: vadd reads a and b and writes c, all n elements long.
            unsafe { sample_project::vadd::vadd(&replaying, &config, &a, &b, &c, n) }.unwrap();
        }
        let graph = replaying.end_capture().unwrap();
        writing.copy(&a, &b).unwrap();
        // SAFETY: the captured launches' buffers are alive, n elements each.
        unsafe { graph.launch(&replaying) }.unwrap();
        replaying.synchronize().unwrap();
        drop(c);
        // SAFETY: as above; the replay is refused before anything is queued.
        let error = unsafe { graph.launch(&replaying) }.unwrap_err();
        assert!(error.to_string().contains("dropped"), "{error}");
        return;
    }
    let record = double.record();
    record.assert_clean();
    let calls: Vec<&str> = record
        .lines
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("call "))
        .collect();
    let launches: Vec<usize> = (0..calls.len())
        .filter(|&i| calls[i].starts_with("call cuGraphLaunch("))
        .collect();
    assert_eq!(
        launches.len(),
        1,
        "the replay after the drop ran: {calls:#?}"
    );
    let replay = launches[0];
    let field = |call: &str, name: &str| -> String {
        let start = call.find(&format!("{name}=")).expect(name) + name.len() + 1;
        call[start..]
            .split([',', ')'])
            .next()
            .unwrap_or_default()
            .to_string()
    };
    let replaying = field(calls[replay], "stream");
    // The copy's mark: the event recorded on the writing stream after it.
    let copy = calls[..replay]
        .iter()
        .rposition(|l| l.starts_with("call cuMemcpyDtoDAsync"))
        .expect("the copy on the writing stream");
    let writing = field(calls[copy], "stream");
    let copied = calls[copy..replay]
        .iter()
        .find(|l| l.starts_with("call cuEventRecord(") && field(l, "stream") == writing)
        .map(|l| field(l, "event"))
        .expect("the copy's mark");
    assert!(
        calls[copy..replay]
            .iter()
            .any(|l| l.starts_with("call cuStreamWaitEvent(")
                && field(l, "stream") == replaying
                && field(l, "event") == copied),
        "the replay did not wait for the copy: {:#?}",
        &calls[copy..=replay]
    );
    let synchronized = replay
        + calls[replay..]
            .iter()
            .position(|l| l.starts_with("call cuStreamSynchronize("))
            .expect("the replaying stream synchronized");
    let marks = calls[replay..synchronized]
        .iter()
        .filter(|l| l.starts_with("call cuEventRecord(") && field(l, "stream") == replaying)
        .count();
    assert_eq!(marks, 1, "{:#?}", &calls[replay..synchronized]);
}

#[test]
fn a_kernel_launched_on_two_devices_in_turn_takes_each_ones_function() {
    // A stub keeps the function it launched last (`FunctionSlot`), for the device it was
    // loaded on: launching on two GPUs in turn must take each one's own function, which the
    // double checks belongs to the launch's context.
    let double = Double::new("two_devices_in_turn").with("GPU_DOUBLE_CUDA_DEVICES", "sm_90,sm_80");
    if super::here(
        &double,
        module_path!(),
        "a_kernel_launched_on_two_devices_in_turn_takes_each_ones_function",
    ) {
        let devices = cuda_devices();
        assert_eq!(devices.len(), 2);
        let n = 1024;
        let operands: Vec<_> = devices.iter().map(|d| vadd_operands(d, n)).collect();
        for _ in 0..3 {
            for (device, ([a, b, c], config)) in devices.iter().zip(&operands) {
                // SAFETY: vadd reads a and b and writes c, all n elements long, on `device`.
                unsafe { sample_project::vadd::vadd(device, config, a, b, c, n) }.unwrap();
            }
        }
        for device in &devices {
            device.synchronize().unwrap();
        }
        return;
    }
    let record = double.record();
    record.assert_clean();
    let launches = record
        .lines
        .iter()
        .filter(|l| l.starts_with("call cuLaunchKernel("))
        .count();
    assert_eq!(launches, 6);
}

#[test]
fn a_default_stream_launch_after_another_streams_write_marks_the_buffer_again() {
    // A default-stream launch that wrote a buffer last leaves it marked so; the next such launch
    // takes no lock to mark it again (`BufferTracking`). Once another stream has written the
    // buffer, a default-stream launch must mark it again: the buffer's drop then waits for the
    // default stream, where that launch runs (not for the other stream's write alone).
    let double = Double::new("default_stream_remark");
    if super::here(
        &double,
        module_path!(),
        "a_default_stream_launch_after_another_streams_write_marks_the_buffer_again",
    ) {
        let device = &cuda_devices()[0];
        let n = 4096;
        let ([a, b, c], config) = vadd_operands(device, n);
        let stream = device.create_stream().unwrap();
        // SAFETY (each launch): vadd reads a and b and writes c, all n elements long.
        unsafe { sample_project::vadd::vadd(device, &config, &a, &b, &c, n) }.unwrap();
        unsafe { sample_project::vadd::vadd(device, &config, &a, &b, &c, n) }.unwrap();
        stream.copy(&c, &a).unwrap();
        unsafe { sample_project::vadd::vadd(device, &config, &a, &b, &c, n) }.unwrap();
        drop(c);
        device.synchronize().unwrap();
        return;
    }
    let record = double.record();
    record.assert_clean();
    let last_launch = record
        .lines
        .iter()
        .rposition(|l| l.starts_with("call cuLaunchKernel("))
        .expect("the launches");
    // The first free after the launches: c's (a's and b's come at the end).
    let freed = last_launch
        + record.lines[last_launch..]
            .iter()
            .position(|l| l.starts_with("call cuMemFree_v2("))
            .expect("c freed");
    assert!(
        record.lines[last_launch..freed]
            .iter()
            .any(|l| l.starts_with("call cuStreamSynchronize(stream=0x0)")),
        "c was freed without waiting for the default stream: {:#?}",
        &record.lines[last_launch..=freed]
    );
}
