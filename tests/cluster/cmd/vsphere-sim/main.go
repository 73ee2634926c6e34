// Command vsphere-sim runs govmomi's vCenter simulator (the package that
// vcsim wraps, with the tagging REST API of vapi/simulator) on loopback,
// for the tests of pv-topology-webhook's vSphere lookup, and creates a
// test's scenario in it through the vSphere APIs.
//
//	vsphere-sim [-user U -password P] [-cert F -key F] [-session-timeout D]
//	    serves a VPX model (datacenter DC0; clusters DC0_C0 and DC0_C1 of
//	    two hosts each, DC0_C<n>_H<m>; a standalone host DC0_H0) on
//	    127.0.0.1, https with the given certificate (else plain http),
//	    accepting only that user and password (sessions idle for D
//	    expire, as vCenter's do); prints one JSON line
//	    {"url": "http[s]://127.0.0.1:PORT"} and runs until killed.
//
//	vsphere-sim setup -url URL -user U -password P [-ca F] [-dir D] -scenario FILE
//	    creates the scenario FILE describes (JSON, see scenario below)
//	    through the SOAP API (HostDatastoreSystem.CreateLocalDatastore on
//	    each host, one shared directory per datastore, so that vCenter
//	    sees one datastore mounted on all of them) and the tagging REST API
//	    (categories, tags, tag-association attach); First Class Disks by
//	    VStorageObjectManager.CreateDisk_Task. Prints one JSON line
//	    {"ok": true, "disks": {"name": "FCD ID"}}.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vapi/rest"
	_ "github.com/vmware/govmomi/vapi/simulator"
	"github.com/vmware/govmomi/vapi/tags"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vslm"
)

// scenario is what setup creates.
type scenario struct {
	// Datastores, each mounted on the hosts named (inventory names).
	Datastores []struct {
		Name  string   `json:"name"`
		Hosts []string `json:"hosts"`
	} `json:"datastores"`
	// First Class Disks (VStorageObjectManager.CreateDisk_Task), each on
	// the datastore named; setup prints their IDs.
	Disks []struct {
		Name      string `json:"name"`
		Datastore string `json:"datastore"`
	} `json:"disks"`
	// Tag categories by name.
	Categories []string `json:"categories"`
	// Tags, each attached to the objects named.
	Tags []struct {
		Category string `json:"category"`
		Name     string `json:"name"`
		// Objects as "Type:name": HostSystem, ClusterComputeResource,
		// Datacenter or Folder.
		Objects []string `json:"objects"`
	} `json:"tags"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "setup" {
		if err := setup(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "vsphere-sim setup:", err)
			os.Exit(1)
		}
		return
	}
	if err := serve(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "vsphere-sim:", err)
		os.Exit(1)
	}
}

func serve(args []string) error {
	flags := flag.NewFlagSet("vsphere-sim", flag.ExitOnError)
	user := flags.String("user", "user", "the only user accepted")
	password := flags.String("password", "pass", "its password")
	cert := flags.String("cert", "", "PEM certificate to serve https with")
	key := flags.String("key", "", "its PEM private key")
	idle := flags.Duration("session-timeout", 0, "idle SOAP and REST sessions expire after this (0: never)")
	_ = flags.Parse(args)

	model := simulator.VPX()
	model.Cluster = 2
	model.ClusterHost = 2
	defer model.Remove()
	if err := model.Create(); err != nil {
		return err
	}
	if *idle > 0 {
		// vcsim's session idle watch (SOAP and the REST API) reads this option.
		options := model.Map().OptionManager()
		options.Setting = append(options.Setting, &types.OptionValue{
			Key:   "config.vmacore.soap.sessionTimeout",
			Value: idle.String(),
		})
	}
	model.Service.Listen = &url.URL{Host: "127.0.0.1:0", User: url.UserPassword(*user, *password)}
	// The tagging REST API (vapi/simulator registers it).
	model.Service.RegisterEndpoints = true
	if *cert != "" {
		pair, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			return err
		}
		model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	}
	server := model.Service.NewServer()
	defer server.Close()
	shown := *server.URL
	shown.User = nil
	shown.Path = ""
	line, _ := json.Marshal(map[string]string{"url": shown.String()})
	fmt.Println(string(line))

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
	return nil
}

func setup(args []string) error {
	flags := flag.NewFlagSet("vsphere-sim setup", flag.ExitOnError)
	raw := flags.String("url", "", "the simulator's URL")
	user := flags.String("user", "user", "user")
	password := flags.String("password", "pass", "password")
	ca := flags.String("ca", "", "PEM CA the simulator's certificate is verified against")
	file := flags.String("scenario", "", "scenario JSON file")
	base := flags.String("dir", "", "where the datastores' directories are made (default: the system's temporary directory)")
	_ = flags.Parse(args)

	var sc scenario
	data, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &sc); err != nil {
		return fmt.Errorf("%s: %w", *file, err)
	}
	u, err := soap.ParseURL(*raw)
	if err != nil {
		return err
	}
	u.User = url.UserPassword(*user, *password)
	ctx := context.Background()
	insecure := u.Scheme == "http"
	var client *govmomi.Client
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		sc := soap.NewClient(u, false)
		sc.DefaultTransport().TLSClientConfig.RootCAs = pool
		vc, err := govmomiVim(ctx, sc)
		if err != nil {
			return err
		}
		client = vc
		if err := client.Login(ctx, u.User); err != nil {
			return err
		}
	} else {
		client, err = govmomi.NewClient(ctx, u, insecure)
		if err != nil {
			return err
		}
	}
	finder := find.NewFinder(client.Client, false)
	dc, err := finder.Datacenter(ctx, "DC0")
	if err != nil {
		return err
	}
	finder.SetDatacenter(dc)

	for _, ds := range sc.Datastores {
		dir, err := os.MkdirTemp(*base, "vsphere-sim-"+ds.Name+"-")
		if err != nil {
			return err
		}
		for _, name := range ds.Hosts {
			host, err := finder.HostSystem(ctx, name)
			if err != nil {
				return fmt.Errorf("datastore %s: host %s: %w", ds.Name, name, err)
			}
			system, err := host.ConfigManager().DatastoreSystem(ctx)
			if err != nil {
				return err
			}
			if _, err := system.CreateLocalDatastore(ctx, ds.Name, filepath.Clean(dir)); err != nil {
				return fmt.Errorf("datastore %s on %s: %w", ds.Name, name, err)
			}
		}
	}

	disks := map[string]string{}
	for _, d := range sc.Disks {
		ds, err := finder.Datastore(ctx, d.Datastore)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		spec := types.VslmCreateSpec{
			Name:         d.Name,
			CapacityInMB: 1,
			BackingSpec: &types.VslmCreateSpecDiskFileBackingSpec{
				VslmCreateSpecBackingSpec: types.VslmCreateSpecBackingSpec{Datastore: ds.Reference()},
			},
		}
		task, err := vslm.NewObjectManager(client.Client).CreateDisk(ctx, spec)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		info, err := task.WaitForResult(ctx)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		disks[d.Name] = info.Result.(types.VStorageObject).Config.Id.Id
	}

	rc := rest.NewClient(client.Client)
	if err := rc.Login(ctx, u.User); err != nil {
		return fmt.Errorf("tagging session: %w", err)
	}
	manager := tags.NewManager(rc)
	categories := map[string]string{}
	for _, name := range sc.Categories {
		id, err := manager.CreateCategory(ctx, &tags.Category{Name: name, Cardinality: "SINGLE"})
		if err != nil {
			return fmt.Errorf("category %s: %w", name, err)
		}
		categories[name] = id
	}
	for _, t := range sc.Tags {
		id, err := manager.CreateTag(ctx, &tags.Tag{Name: t.Name, CategoryID: categories[t.Category]})
		if err != nil {
			return fmt.Errorf("tag %s: %w", t.Name, err)
		}
		for _, o := range t.Objects {
			ref, err := object_(ctx, finder, o)
			if err != nil {
				return fmt.Errorf("tag %s: %s: %w", t.Name, o, err)
			}
			if err := manager.AttachTag(ctx, id, ref); err != nil {
				return fmt.Errorf("tag %s on %s: %w", t.Name, o, err)
			}
		}
	}
	line, _ := json.Marshal(map[string]any{"ok": true, "disks": disks})
	fmt.Println(string(line))
	return nil
}

// govmomiVim connects a govmomi client through a SOAP client whose TLS is set.
func govmomiVim(ctx context.Context, sc *soap.Client) (*govmomi.Client, error) {
	vim, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, err
	}
	return &govmomi.Client{Client: vim, SessionManager: session.NewManager(vim)}, nil
}

// object_ finds "Type:name".
func object_(ctx context.Context, finder *find.Finder, spec string) (mo.Reference, error) {
	var kind, name string
	for i := range spec {
		if spec[i] == ':' {
			kind, name = spec[:i], spec[i+1:]
			break
		}
	}
	switch kind {
	case "HostSystem":
		return finder.HostSystem(ctx, name)
	case "ClusterComputeResource":
		return finder.ClusterComputeResource(ctx, name)
	case "Datacenter":
		return finder.Datacenter(ctx, name)
	case "Folder":
		return finder.Folder(ctx, name)
	}
	return nil, fmt.Errorf("unknown object type %q", kind)
}
